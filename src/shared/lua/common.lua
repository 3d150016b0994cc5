#!lua
--!df flags=allow-undeclared-keys
-- Shared by every legcrawl script (prepended to each). The first line (a
-- Redis 7 script header without flags) makes the server refuse the whole
-- script while it is out of memory, instead of failing it at its first write
-- that grows memory -- a script that already wrote (a DEL, a ZPOPMIN) would
-- otherwise run on past maxmemory. The second tells Dragonfly that the
-- scripts touch keys found inside them (below); Redis reads it as a comment.
--
-- Keys. KEYS[1] is the crawl's `meta` hash, then every fixed key the script
-- (with this file) names, then the `lease:TOKEN` records of the tokens the
-- caller passes (the Rust caller declares them: client.rs, `COMMON_KEYS` and
-- each script's `keys`; client/declared.rs checks those lists against these
-- files). A script names a key with K(name), which fails the call on a key
-- the caller did not declare.
-- A few keys cannot be known ahead: a host's queue `q:HOST` and `parked:HOST`
-- when the host comes out of `ready`, `parkedhosts` or a lease record, and
-- the `lease:TOKEN` of a token made (lease.lua) or reclaimed (an expired lease
-- found in `leases`) inside the script. Those are built with found(name) from
-- the same prefix as the declared keys, so they carry the same {NAME} hash tag
-- and live in the same Redis Cluster slot, on the node the call was routed to
-- by KEYS[1]; this is the compromise Lua-heavy queues make too (BullMQ builds
-- its per-job keys inside its scripts from a hash-tagged prefix).
--
-- ARGV[1] is the crawl's key prefix ("legcrawl:{NAME}:"), ARGV[2]
-- the caller's per-host in-flight limit, used only while the crawl has no
-- stored job: the job's `per_host` (field of the `job` hash, written with each
-- job version by job.lua) is the crawl's, whoever calls. ARGV[3] is the
-- crawl's epoch as the caller read it when it joined (epoch.lua); each
-- script's own arguments start at ARGV[4].
--
-- Loss check, before anything is read or written: the epoch in `meta` must be
-- the caller's, and a crawl that has stored seeds (`created`) must still have
-- them. Otherwise the crawl's state is gone from Redis (a restart without its
-- data, FLUSHALL, a deleted or evicted key, or a crawl made anew under the same
-- name) and the script fails with LEGCRAWL_GONE, writing nothing: the worker
-- stops rather than crawl on from a wrong state (or report it drained). Times
-- are the server's (TIME), in milliseconds, so that workers on machines whose
-- clocks differ agree on leases and delays.
local P = ARGV[1]
if KEYS[1] ~= P .. 'meta' then
  return redis.error_reply('LEGCRAWL_KEYS KEYS[1] is not the meta key of the prefix in ARGV[1]')
end
local DECLARED = {}
for _, key in ipairs(KEYS) do
  DECLARED[key] = true
end

-- A key of the crawl the caller declared in KEYS.
local function K(name)
  local key = P .. name
  if not DECLARED[key] then
    error('LEGCRAWL_KEYS ' .. key .. ' is not declared in KEYS')
  end
  return key
end

-- A key of the crawl found inside the script (see above): same prefix, same
-- hash tag, same slot.
local function found(name)
  return P .. name
end

do
  local meta = redis.call('HMGET', KEYS[1], 'epoch', 'created')
  if not meta[1] then
    return redis.error_reply('LEGCRAWL_GONE its epoch (meta) is missing')
  elseif meta[1] ~= ARGV[3] then
    return redis.error_reply('LEGCRAWL_GONE it was made anew (another epoch)')
  elseif meta[2] and redis.call('EXISTS', K('seeds')) == 0 then
    return redis.error_reply('LEGCRAWL_GONE its seed set is missing')
  end
end
local PER_HOST = tonumber(redis.call('HGET', K('job'), 'per_host') or ARGV[2])

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local function count(name, by)
  if by ~= 0 then
    redis.call('HINCRBY', K('counters'), name, by)
  end
end

-- A host is in `ready` exactly when it has queued requests and fewer than
-- PER_HOST in flight; its score is the earliest time its next request may start.
local function refresh_host(host)
  local queued = redis.call('ZCARD', found('q:' .. host))
  local inflight = tonumber(redis.call('HGET', K('inflight'), host) or '0')
  if queued > 0 and inflight < PER_HOST then
    local next = tonumber(redis.call('HGET', K('next'), host) or '0')
    redis.call('ZADD', K('ready'), next, host)
  else
    redis.call('ZREM', K('ready'), host)
  end
end

-- Queues a request at the end of its priority in its host's queue. The member
-- is the sequence number (8 bytes, big-endian), the request's fingerprint (20
-- bytes) and the request (its stored form: a version byte, then bincode);
-- Redis orders equal scores by member, so equal priorities come out first in,
-- first out. (Members written before: 16 hex digits of sequence, 40 of
-- fingerprint, JSON; lease.lua reads both, and they sort after the new ones.)
-- `delay_ms` is the host's default delay (0 on loopback, else 1 s; the same
-- whoever writes it first), which applies while the crawl's job sets none (see
-- host_delay).
local function push(host, priority, fp, body, delay_ms)
  local seq = redis.call('HINCRBY', K('meta'), 'seq', 1)
  local be = {}
  for i = 8, 1, -1 do
    be[i] = string.char(seq % 256)
    seq = math.floor(seq / 256)
  end
  redis.call('ZADD', found('q:' .. host), -tonumber(priority), table.concat(be) .. fp .. body)
  redis.call('HINCRBY', K('meta'), 'frontier', 1)
  redis.call('HSETNX', K('delay'), host, delay_ms)
end

-- The gap between two starts on `host`: the job's delay when it sets one
-- (field `delay` of the `job` hash, the same for every host and rewritten with
-- each job version, so a new delay holds at once for every worker), else the
-- host's default; and at least its robots.txt Crawl-delay.
local function host_delay(host)
  local delay = redis.call('HGET', K('job'), 'delay') or redis.call('HGET', K('delay'), host) or '0'
  return math.max(tonumber(delay), tonumber(redis.call('HGET', K('crawldelay'), host) or '0'))
end

-- The next fencing token: one more than the last, and at least the server's
-- time in ms times 1024. Time in the high bits keeps tokens unique across a
-- Redis restart that lost the tail of its data (an older snapshot, an AOF
-- fsynced every second): the counter may come back lower, but every token
-- handed out before the restart is below 1024 x (the time of the restart),
-- and every token after it is above, unless more than 1024 tokens per ms were
-- handed out for longer than the server was down. 2^53 (exact in Lua's
-- doubles) is reached in the year 2248. Returned as a decimal string (Lua
-- would print a large number as 1.7e+15).
local function next_token(now)
  local last = tonumber(redis.call('HGET', K('meta'), 'token') or '0')
  local token = string.format('%.0f', math.max(last + 1, now * 1024))
  redis.call('HSET', K('meta'), 'token', token)
  return token
end

-- Ends a lease without completing it: its request goes back to its place in
-- its host's queue. False when the lease no longer exists.
local function unlease(token)
  local key = found('lease:' .. token)
  local lease = redis.call('HMGET', key, 'host', 'score', 'member')
  redis.call('ZREM', K('leases'), token)
  if not lease[1] then
    return false
  end
  redis.call('DEL', key)
  local host = lease[1]
  redis.call('ZADD', found('q:' .. host), lease[2], lease[3])
  redis.call('HINCRBY', K('meta'), 'frontier', 1)
  if redis.call('HINCRBY', K('inflight'), host, -1) <= 0 then
    redis.call('HDEL', K('inflight'), host)
  end
  refresh_host(host)
  return true
end

-- Leases whose expiry has passed (their worker died or lost Redis for longer
-- than the TTL) go back to the frontier; at most `limit` per call.
local function reclaim(now, limit)
  local tokens = redis.call('ZRANGEBYSCORE', K('leases'), '-inf', now, 'LIMIT', 0, limit)
  local n = 0
  for _, token in ipairs(tokens) do
    if unlease(token) then
      n = n + 1
    end
  end
  count('leases/expired', n)
  return n
end

-- Queues the requests listed from ARGV[at] on (a count, then per request: host,
-- priority, dont_filter 0/1, fingerprint, request, host delay ms): each passes
-- the seen set unless it bypasses it. Counts them; returns how many were
-- queued and filtered, and the set of hosts whose queues grew.
local function queue_requests(at)
  local queued, filtered = 0, 0
  local touched = {}
  local requests = tonumber(ARGV[at])
  for i = 0, requests - 1 do
    local r = at + 1 + i * 6
    local rhost, priority, dont_filter, fp, body, delay =
      ARGV[r], ARGV[r + 1], ARGV[r + 2], ARGV[r + 3], ARGV[r + 4], ARGV[r + 5]
    local new = redis.call('SADD', K('seen'), fp) == 1
    if new or dont_filter == '1' then
      push(rhost, priority, fp, body, delay)
      touched[rhost] = true
      queued = queued + 1
    else
      filtered = filtered + 1
    end
  end
  count('frontier/enqueued', queued)
  count('dupefilter/filtered', filtered)
  return queued, filtered, touched
end
