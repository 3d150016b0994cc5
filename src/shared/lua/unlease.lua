-- Worker ARGV[4] saw Redis go back: the leases named from ARGV[5] on, of its
-- completions Redis lost, go back to the frontier at once if Redis still
-- holds them as this worker's (they were leased before the point Redis went
-- back to). The worker completed them and holds them no more, so nothing
-- would renew or complete them: they would stall their pages, and their
-- hosts' in-flight counts, until their TTL. The worker stays listed.
-- Returns how many leases were returned.
local worker = ARGV[4]
local mine = {}
for i = 5, #ARGV do
  local token = ARGV[i]
  if redis.call('HGET', K('lease:' .. token), 'worker') == worker then
    mine[#mine + 1] = token
  end
end
local n = unlease_all(mine)
count('leases/returned', n)
return n
