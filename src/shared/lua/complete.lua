-- Completes lease ARGV[5] of worker ARGV[4], atomically: the lease ends, the
-- host's politeness is updated, the page's items are appended to the items
-- stream, its new requests pass the seen set and are queued, its page record
-- is written and the counters move. A lease that expired and was reclaimed
-- (perhaps leased again to another worker) writes nothing.
--
-- ARGV[6] backoff ms (0: none), ARGV[7] Crawl-delay ms (-1: none), ARGV[8]
-- page fingerprint, ARGV[9] page record ('' : none), ARGV[10] the page's due
-- time in unix seconds ('' : not due, '-' : leave the due index as it is),
-- ARGV[11] the id of the worker's output file ('' : none), ARGV[12] what
-- robots.txt said ('ok', 'failed': 5xx or unreachable, '' : not asked),
-- ARGV[13] the worker's WARC file holding the page's records ('' : none) and
-- ARGV[14] its length after them (synced: stored as the file's mark),
-- ARGV[15] what went wrong with the page (a JSON row of the recent errors,
-- '' : nothing) and ARGV[16] how many recent errors are kept, then a count
-- and that many counter pairs (name, by), a count and that many items (JSON),
-- and a count and that many requests (host, priority, dont_filter 0/1,
-- fingerprint, request, host delay ms).
--
-- Returns {1} when this lease was already completed (a retry after a lost
-- reply), {0} when it is gone, {2, queued, filtered, unique, parked, commits}
-- when done (unique: new to the seen set; parked: 1 when it parked the host;
-- commits: the caller's witness's commit sequence, its field of the
-- `commits` hash, which each of its completions advances by one with its
-- writes, 0 without a witness: what a worker keeps, common.lua).
local worker, token = ARGV[4], ARGV[5]
local backoff, crawl_delay = tonumber(ARGV[6]), tonumber(ARGV[7])
local now = now_ms()
local key = K('lease:' .. token)
local lease = redis.call('HMGET', key, 'worker', 'host')
if lease[1] ~= worker then
  if redis.call('ZSCORE', K('done'), token) then
    return {1}
  end
  count('leases/stale_completions', 1)
  return {0}
end
local host = lease[2]
redis.call('DEL', key)
redis.call('ZREM', K('leases'), token)
redis.call('ZADD', K('done'), now, token)
redis.call('ZREMRANGEBYSCORE', K('done'), '-inf', now - 3600000)
if redis.call('HINCRBY', K('inflight'), host, -1) <= 0 then
  redis.call('HDEL', K('inflight'), host)
end
if crawl_delay >= 0 then
  redis.call('HSET', K('crawldelay'), host, crawl_delay)
end
if backoff > 0 then
  local next = tonumber(redis.call('HGET', K('next'), host) or '0')
  redis.call('HSET', K('next'), host, math.max(next, now + backoff))
end

if ARGV[13] ~= '' then
  redis.call('HSET', K('warc'), ARGV[13], ARGV[14])
end

if ARGV[15] ~= '' then
  redis.call('LPUSH', K('errors'), ARGV[15])
  redis.call('LTRIM', K('errors'), 0, tonumber(ARGV[16]) - 1)
end

local at = 17
local counters = tonumber(ARGV[at])
for i = 0, counters - 1 do
  count(ARGV[at + 1 + i * 2], tonumber(ARGV[at + 2 + i * 2]))
end
at = at + 1 + counters * 2

local items = tonumber(ARGV[at])
for i = 1, items do
  if ARGV[11] ~= '' then
    redis.call('XADD', K('items'), '*', 'item', ARGV[at + i], 'worker', worker, 'out', ARGV[11])
  else
    redis.call('XADD', K('items'), '*', 'item', ARGV[at + i], 'worker', worker)
  end
end
at = at + 1 + items
count('items/stored', items)

local queued, filtered, unique, touched = queue_requests(at)

if ARGV[9] ~= '' then
  redis.call('HSET', K('pages'), ARGV[8], ARGV[9])
end
if ARGV[10] == '' then
  redis.call('ZREM', K('due'), ARGV[8])
elseif ARGV[10] ~= '-' then
  redis.call('ZADD', K('due'), tonumber(ARGV[10]), ARGV[8])
end
count('pages/completed', 1)
local commits = 0
if WITNESS ~= '' then
  commits = redis.call('HINCRBY', K('commits'), WITNESS, 1)
end

-- A host whose robots.txt failed PARK_AFTER times in a row is parked: its
-- queue is set aside (its lists become `parked:HOST:PRIO`, out of the frontier
-- count, so the crawl can drain) until a worker starts again (unpark.lua).
-- Nothing is lost.
local PARK_AFTER = 3
local parked = 0
if ARGV[12] == 'ok' then
  redis.call('HDEL', K('robotsfail'), host)
elseif ARGV[12] == 'failed' then
  if redis.call('HINCRBY', K('robotsfail'), host, 1) >= PARK_AFTER then
    local before = tonumber(redis.call('HGET', K('parkedhosts'), host) or '0')
    local n = move_queue(host, true)
    redis.call('HINCRBY', K('meta'), 'frontier', -n)
    redis.call('HSET', K('parkedhosts'), host, before + n)
    redis.call('HDEL', K('robotsfail'), host)
    count('robots/host_parked', 1)
    parked = 1
  end
end

touched[host] = true
for h in pairs(touched) do
  refresh_host(h)
end
return {2, queued, filtered, unique, parked, commits}
