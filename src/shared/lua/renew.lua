-- Worker ARGV[4] is alive: its record (ARGV[6], JSON) is stored with the time,
-- and each of its leases named after ARGV[6] is extended to now + ARGV[5] ms.
-- A lease already reclaimed stays gone (its completion will write nothing).
-- Returns how many leases were extended.
-- Dead workers are unlisted, and old completed tokens dropped (below).
local worker, ttl, info = ARGV[4], tonumber(ARGV[5]), ARGV[6]
local now = now_ms()
local kept = 0
for i = 7, #ARGV do
  local token = ARGV[i]
  if redis.call('HGET', K('lease:' .. token), 'worker') == worker then
    redis.call('ZADD', K('leases'), 'XX', now + ttl, token)
    kept = kept + 1
  end
end
redis.call('HSET', K('workers'), worker, info)
redis.call('HSET', K('alive'), worker, now)

-- A worker not heard from for three of its lease TTLs (its record's
-- lease_ttl_ms, else 60 s) is dead -- killed, or cut off -- and is unlisted;
-- its leases expire on their own. Tokens completed over an hour ago leave the
-- `done` set here too, so they expire while nothing completes.
local alive = redis.call('HGETALL', K('alive'))
for i = 1, #alive, 2 do
  local id, at = alive[i], tonumber(alive[i + 1]) or 0
  local wttl = 60000
  local ok, record = pcall(cjson.decode, redis.call('HGET', K('workers'), id) or '')
  if ok and type(record) == 'table' and tonumber(record.lease_ttl_ms) then
    wttl = tonumber(record.lease_ttl_ms)
  end
  if now - at > 3 * wttl then
    redis.call('HDEL', K('workers'), id)
    redis.call('HDEL', K('alive'), id)
  end
end
redis.call('ZREMRANGEBYSCORE', K('done'), '-inf', now - 3600000)
return kept
