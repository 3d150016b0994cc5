-- Worker ARGV[4] stops: each of its leases named from ARGV[5] on goes back to
-- the frontier at once, in its place, and the worker is no longer listed.
-- Returns how many leases were returned.
local worker = ARGV[4]
local n = 0
for i = 5, #ARGV do
  local token = ARGV[i]
  if redis.call('HGET', K('lease:' .. token), 'worker') == worker and unlease(token) then
    n = n + 1
  end
end
count('leases/returned', n)
redis.call('HDEL', K('workers'), worker)
redis.call('HDEL', K('alive'), worker)
return n
