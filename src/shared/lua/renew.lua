-- Worker ARGV[4] is alive: its record (ARGV[6], JSON) is stored with the time,
-- and each of its leases named after ARGV[6] is extended to now + ARGV[5] ms.
-- A lease already reclaimed stays gone (its completion will write nothing).
-- Returns how many leases were extended.
local worker, ttl, info = ARGV[4], tonumber(ARGV[5]), ARGV[6]
local now = now_ms()
local kept = 0
for i = 7, #ARGV do
  local token = ARGV[i]
  if redis.call('HGET', P .. 'lease:' .. token, 'worker') == worker then
    redis.call('ZADD', P .. 'leases', 'XX', now + ttl, token)
    kept = kept + 1
  end
end
redis.call('HSET', P .. 'workers', worker, info)
redis.call('HSET', P .. 'alive', worker, now)
return kept
