-- Worker ARGV[4]'s leases named from ARGV[6] on go back to the frontier at
-- once, at the head of their priority (in lease order), where Redis still
-- holds them as this worker's. ARGV[5] says why:
--   'stop'  the worker stops: it is no longer listed (nor beating);
--   'lost'  the worker saw Redis go back: these are the leases of its
--           completions Redis lost (leased before the point it went back
--           to). The worker holds them no more, so nothing would renew or
--           complete them, and they would stall their pages, and their
--           hosts' in-flight counts, until their TTL. It stays listed.
-- Returns how many leases were returned.
local worker, why = ARGV[4], ARGV[5]
local mine = {}
for i = 6, #ARGV do
  local token = ARGV[i]
  if redis.call('HGET', K('lease:' .. token), 'worker') == worker then
    mine[#mine + 1] = token
  end
end
local n = unlease_all(mine)
count('leases/returned', n)
if why == 'stop' then
  redis.call('HDEL', K('workers'), worker)
  redis.call('HDEL', K('alive'), worker)
  redis.call('ZREM', K('beats'), worker)
end
return n
