-- Worker ARGV[3] is alive: its record (ARGV[5], JSON) is stored with the time,
-- and each of its leases named after ARGV[5] is extended to now + ARGV[4] ms.
-- A lease already reclaimed stays gone (its completion will write nothing).
-- Returns how many leases were extended.
local worker, ttl, info = ARGV[3], tonumber(ARGV[4]), ARGV[5]
local now = now_ms()
local kept = 0
for i = 6, #ARGV do
  local token = ARGV[i]
  if redis.call('HGET', P .. 'lease:' .. token, 'worker') == worker then
    redis.call('ZADD', P .. 'leases', 'XX', now + ttl, token)
    kept = kept + 1
  end
end
redis.call('HSET', P .. 'workers', worker, info)
redis.call('HSET', P .. 'alive', worker, now)
return kept
