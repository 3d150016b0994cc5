-- Worker ARGV[4] stops: each of its leases named from ARGV[5] on goes back to
-- the frontier at once, at the head of its priority (in lease order), and
-- the worker is no longer listed (nor beating).
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
redis.call('HDEL', K('workers'), worker)
redis.call('HDEL', K('alive'), worker)
redis.call('ZREM', K('beats'), worker)
return n
