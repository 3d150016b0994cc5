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
-- A few keys cannot be known ahead: a host's queue (its lists `q:HOST:PRIO`
-- and its priorities `qp:HOST`) and, while it is parked, `parked:HOST:PRIO`
-- and `parkedp:HOST`, when the host comes out of `ready`, `parkedhosts` or a
-- lease record; the `lease:TOKEN` of a token made (lease.lua) or reclaimed (an
-- expired lease found in `leases`) inside the script; and the seen set's
-- bucket `s:N` of a fingerprint (seen_add). Those are built with found(name) from
-- the same prefix as the declared keys, so they carry the same {NAME} hash tag
-- and live in the same Redis Cluster slot, on the node the call was routed to
-- by KEYS[1]; this is the compromise Lua-heavy queues make too (BullMQ builds
-- its per-job keys inside its scripts from a hash-tagged prefix).
--
-- ARGV[1] is the crawl's key prefix ("legcrawl:{NAME}:"), ARGV[2]
-- the caller's per-host in-flight limit, used only while the crawl has no
-- stored job: the job's `per_host` (field of the `job` hash, written with each
-- job version by job.lua) is the crawl's, whoever calls. ARGV[3] is the
-- crawl's epoch as the caller read it when it joined (epoch.lua), optionally
-- followed by ':WITNESS:SEQ': the caller's witness id (kept by the worker
-- across its runs) and the highest value of that witness's commit sequence
-- it saw (field WITNESS of the `commits` hash, advanced by each of its
-- completions, complete.lua); each script's own arguments start at ARGV[4].
--
-- Loss check, before anything is read or written: the epoch in `meta` must be
-- the caller's, and a crawl that has stored seeds (`created`) must still have
-- them. Otherwise the crawl's state is gone from Redis (a restart without its
-- data, FLUSHALL, a deleted or evicted key, or a crawl made anew under the same
-- name) and the script fails with LEGCRAWL_GONE, writing nothing: the worker
-- stops rather than crawl on from a wrong state (or report it drained).
-- A witness's sequence below what the caller saw means Redis went back (a
-- lost AOF tail, a failover that lost writes, evicted keys): the script fails
-- with LEGCRAWL_WENTBACK SEEN NOW, writing nothing; the caller names the loss
-- and calls again with NOW (client/commits.rs). Only the witness's own
-- completions advance its sequence, so other workers' later completions
-- cannot hide its loss. Times
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

local WITNESS
do
  local meta = redis.call('HMGET', KEYS[1], 'epoch', 'created')
  local epoch, seen
  epoch, WITNESS, seen = string.match(ARGV[3], '^([^:]*):?([^:]*):?(%d*)$')
  if not meta[1] then
    return redis.error_reply('LEGCRAWL_GONE its epoch (meta) is missing')
  elseif meta[1] ~= epoch then
    return redis.error_reply('LEGCRAWL_GONE it was made anew (another epoch)')
  elseif meta[2] and redis.call('EXISTS', K('seeds')) == 0 then
    return redis.error_reply('LEGCRAWL_GONE its seed set is missing')
  elseif WITNESS ~= '' and seen ~= '' then
    local now = redis.call('HGET', K('commits'), WITNESS) or '0'
    if tonumber(now) < tonumber(seen) then
      return redis.error_reply('LEGCRAWL_WENTBACK ' .. seen .. ' ' .. now)
    end
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
  local queued = redis.call('ZCARD', found('qp:' .. host))
  local inflight = tonumber(redis.call('HGET', K('inflight'), host) or '0')
  if queued > 0 and inflight < PER_HOST then
    local next = tonumber(redis.call('HGET', K('next'), host) or '0')
    redis.call('ZADD', K('ready'), next, host)
  else
    redis.call('ZREM', K('ready'), host)
  end
end

-- A host's queue is one list per priority, `q:HOST:PRIO` (PRIO in decimal),
-- first in, first out, and the sorted set `qp:HOST` of the priorities that
-- have one (member PRIO, score -PRIO: the highest first); a list exists
-- exactly when its priority is in `qp:HOST`, so the host has queued requests
-- exactly when `qp:HOST` exists. A member is the request's fingerprint (20
-- bytes) and the request (its stored form: a version byte, then bincode).
local function queue_key(host, prio)
  return found('q:' .. host .. ':' .. prio)
end

-- A priority as it names its list: a whole number in decimal.
local function prio_name(priority)
  return string.format('%d', tonumber(priority))
end

-- Queues a request at the end of its priority in its host's queue.
-- `delay_ms` is the host's default delay (0 on loopback, else 1 s; the same
-- whoever writes it first), which applies while the crawl's job sets none (see
-- host_delay).
local function push(host, priority, fp, body, delay_ms)
  local prio = prio_name(priority)
  if redis.call('RPUSH', queue_key(host, prio), fp .. body) == 1 then
    redis.call('ZADD', found('qp:' .. host), -tonumber(prio), prio)
  end
  redis.call('HINCRBY', K('meta'), 'frontier', 1)
  redis.call('HSETNX', K('delay'), host, delay_ms)
end

-- Takes the next request of `host`: the first of its highest priority.
-- Returns the member and its priority, or nil when the host has none queued.
local function pop(host)
  local qp = found('qp:' .. host)
  while true do
    local prio = redis.call('ZRANGE', qp, 0, 0)[1]
    if not prio then
      return nil
    end
    local q = queue_key(host, prio)
    local member = redis.call('LPOP', q)
    if redis.call('EXISTS', q) == 0 then
      redis.call('ZREM', qp, prio)
    end
    if member then
      return member, prio
    end
  end
end

-- Makes `dest` (one of the two keys) the list of `first`'s elements followed
-- by `second`'s, either of which may be missing: a RENAME when one is empty,
-- else the shorter one's elements are moved, at most 1,000 per command.
local function concat_lists(first, second, dest)
  local n1, n2 = redis.call('LLEN', first), redis.call('LLEN', second)
  if n1 == 0 or n2 == 0 then
    local only = (n1 > 0) and first or second
    if n1 + n2 > 0 and only ~= dest then
      redis.call('RENAME', only, dest)
    end
    return
  end
  local kept = second
  if n1 <= n2 then
    -- `first`'s elements onto the head of `second`, from its last one back.
    local hi = n1 - 1
    while hi >= 0 do
      local part = redis.call('LRANGE', first, math.max(0, hi - 999), hi)
      local reversed = {}
      for i = #part, 1, -1 do
        reversed[#reversed + 1] = part[i]
      end
      redis.call('LPUSH', second, unpack(reversed))
      hi = hi - #part
    end
    redis.call('DEL', first)
  else
    for lo = 0, n2 - 1, 1000 do
      redis.call('RPUSH', first, unpack(redis.call('LRANGE', second, lo, lo + 999)))
    end
    redis.call('DEL', second)
    kept = first
  end
  if kept ~= dest then
    redis.call('RENAME', kept, dest)
  end
end

-- Parks a host's queue (`park`: its lists `q:HOST:PRIO` and `qp:HOST` become
-- `parked:HOST:PRIO` and `parkedp:HOST`), or brings it back. Either way what
-- the other side already holds is merged: per priority the parked requests,
-- queued earlier, stay ahead of those queued since. Returns how many moved.
local function move_queue(host, park)
  local from_p, to_p = found('qp:' .. host), found('parkedp:' .. host)
  if not park then
    from_p, to_p = to_p, from_p
  end
  local moved = 0
  for _, prio in ipairs(redis.call('ZRANGE', from_p, 0, -1)) do
    local q, parked = queue_key(host, prio), found('parked:' .. host .. ':' .. prio)
    local from, to = q, parked
    if not park then
      from, to = parked, q
    end
    moved = moved + redis.call('LLEN', from)
    concat_lists(parked, q, to)
    if redis.call('EXISTS', to) == 1 then
      redis.call('ZADD', to_p, -tonumber(prio), prio)
    end
  end
  redis.call('DEL', from_p)
  return moved
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

-- Ends a lease without completing it: its request goes back to the head of
-- its priority in its host's queue, to be leased next. False when the lease
-- no longer exists.
local function unlease(token)
  local key = found('lease:' .. token)
  local lease = redis.call('HMGET', key, 'host', 'prio', 'member')
  redis.call('ZREM', K('leases'), token)
  if not lease[1] then
    return false
  end
  redis.call('DEL', key)
  local host, prio = lease[1], lease[2]
  if redis.call('LPUSH', queue_key(host, prio), lease[3]) == 1 then
    redis.call('ZADD', found('qp:' .. host), -tonumber(prio), prio)
  end
  redis.call('HINCRBY', K('meta'), 'frontier', 1)
  if redis.call('HINCRBY', K('inflight'), host, -1) <= 0 then
    redis.call('HDEL', K('inflight'), host)
  end
  refresh_host(host)
  return true
end

-- Ends the leases `tokens` as unlease does, the newest first, so that leases
-- of one host and priority come back in the order they were leased (each goes
-- to the head). Returns how many still existed.
local function unlease_all(tokens)
  local sorted = {}
  for i, token in ipairs(tokens) do
    sorted[i] = token
  end
  table.sort(sorted, function(a, b)
    return tonumber(a) > tonumber(b)
  end)
  local n = 0
  for _, token in ipairs(sorted) do
    if unlease(token) then
      n = n + 1
    end
  end
  return n
end

-- Leases whose expiry has passed (their worker died or lost Redis for longer
-- than the TTL) go back to the frontier; at most `limit` per call.
local function reclaim(now, limit)
  local tokens = redis.call('ZRANGEBYSCORE', K('leases'), '-inf', now, 'LIMIT', 0, limit)
  local n = unlease_all(tokens)
  count('leases/expired', n)
  return n
end

-- Heartbeats: the sorted set `beats`, worker -> the server time (ms) it was
-- last heard from. A worker beats every 2 s (engine::worker's HEARTBEAT, on
-- a task of its own) and with each lease call. A worker not heard from for
-- BEAT_DEAD ms is dead (killed, paused, or cut off from Redis): reap() takes
-- it out of `beats` and returns its leases to the frontier as an expired
-- lease returns (unlease: the host's in-flight count drops, its next allowed
-- start stays where the dead worker's last lease put it, so the delay since
-- that request's start still holds). Its later completions write nothing
-- (their lease records are gone); its next beat lists it again.
--
-- Silence is counted only while the crawl is heard from: `meta`'s
-- `beat_tick` is the last time any reap ran (every beat and lease call of
-- any worker, so at least every 2 s while one runs). A gap longer than
-- BEAT_STALL means Redis was not answering (paused, busy, cut off) or no
-- worker ran: every beat moves forward by the gap, so that no live worker is
-- taken for dead because the server, not the worker, was away. A worker that
-- died during such a gap is released BEAT_DEAD after the crawl is heard from
-- again.
local BEAT_DEAD = 6000
local BEAT_STALL = 4000

-- Takes dead workers out of `beats` and returns their leases; `worker` (or
-- nil) beats first. Returns how many leases went back.
local function reap(now, worker)
  local last = tonumber(redis.call('HGET', K('meta'), 'beat_tick') or '0')
  redis.call('HSET', K('meta'), 'beat_tick', now)
  if last > 0 and now - last > BEAT_STALL then
    local beats = redis.call('ZRANGE', K('beats'), 0, -1, 'WITHSCORES')
    for i = 1, #beats, 2 do
      redis.call('ZADD', K('beats'), tonumber(beats[i + 1]) + now - last, beats[i])
    end
  end
  if worker then
    redis.call('ZADD', K('beats'), now, worker)
  end
  local dead = redis.call('ZRANGEBYSCORE', K('beats'), '-inf', now - BEAT_DEAD)
  if #dead == 0 then
    return 0
  end
  local is_dead = {}
  for _, id in ipairs(dead) do
    is_dead[id] = true
    redis.call('ZREM', K('beats'), id)
  end
  local theirs = {}
  for _, token in ipairs(redis.call('ZRANGE', K('leases'), 0, -1)) do
    if is_dead[redis.call('HGET', found('lease:' .. token), 'worker') or ''] then
      theirs[#theirs + 1] = token
    end
  end
  local n = unlease_all(theirs)
  count('leases/orphaned', n)
  count('workers/dead', #dead)
  return n
end

-- The seen set: hashes `s:N` (its buckets), one field per fingerprint -- its
-- first 16 bytes (a 128-bit prefix of SHA-1: two requests would have to agree
-- on all 128 bits to be taken for one) -- with an empty value. A hash of at
-- most 128 fields (`hash-max-listpack-entries`) is one listpack: about 20
-- bytes a fingerprint, against 72 in a set. The buckets grow by linear
-- hashing. h is the fingerprint's first 4 bytes as a number; `meta` keeps the
-- level L (`seen_level`), the split pointer S (`seen_split`), both 0 at first
-- (one bucket: a small crawl has few keys), and the count (`seen_count`). A
-- fingerprint's bucket is h mod 2^L, or h mod 2^(L+1) when that is below S.
-- Whenever the count passes SEEN_LOAD x (2^L + S), the number of buckets,
-- bucket S is split: its fields whose bit L of h is set move to bucket
-- S + 2^L; S grows, and when it reaches 2^L, L grows and S is 0 again.
--
-- SEEN_LOAD: a split bucket covers 1/2^(L+1) of the hash space, an unsplit
-- one twice that. With count <= SEEN_LOAD x (2^L + S) < SEEN_LOAD x 2^(L+1),
-- a split bucket expects fewer than SEEN_LOAD fields and an unsplit one fewer
-- than 2 x SEEN_LOAD = 48 (the most just before it splits). SHA-1's bits
-- spread the fingerprints as a Poisson process, and P(Poisson(48) >= 128) is
-- about 1e-21: no bucket of any crawl reaches 128 fields and turns into a
-- hashtable (which would not turn back). Buckets hold 24 fields on average,
-- so a key's own cost (about 100 bytes) adds about 4 bytes a fingerprint. A
-- split reads one bucket (about 48 fields) and moves about half of it, at
-- most once per SEEN_LOAD fingerprints added: no call grows long.
local SEEN_LOAD = 24
local SEEN = nil

-- The seen set's level, split pointer and count, read once per call.
local function seen_state()
  if not SEEN then
    local m = redis.call('HMGET', K('meta'), 'seen_level', 'seen_split', 'seen_count')
    SEEN = {level = tonumber(m[1] or '0'), split = tonumber(m[2] or '0'), count = tonumber(m[3] or '0')}
  end
  return SEEN
end

-- The first 4 bytes of a fingerprint (or of its 16-byte field), as a number.
local function seen_hash(fp)
  local a, b, c, d = string.byte(fp, 1, 4)
  return ((a * 256 + b) * 256 + c) * 256 + d
end

-- The number of the bucket that holds fingerprint `fp`, in decimal (common.lua
-- and seen.lua each have this function and seen_hash; a test keeps them equal).
local function seen_bucket(fp, level, split)
  local h = seen_hash(fp)
  local size = 2 ^ level
  local n = h % size
  if n < split then
    n = h % (size * 2)
  end
  return string.format('%.0f', n)
end

-- Splits bucket S (see above).
local function seen_split(st)
  local size = 2 ^ st.level
  local from = found('s:' .. string.format('%.0f', st.split))
  local fields = redis.call('HGETALL', from)
  local moved, values = {}, {}
  for i = 1, #fields, 2 do
    local field = fields[i]
    if math.floor(seen_hash(field) / size) % 2 == 1 then
      moved[#moved + 1] = field
      values[#values + 1] = field
      values[#values + 1] = ''
    end
  end
  if #moved > 0 then
    redis.call('HSET', found('s:' .. string.format('%.0f', st.split + size)), unpack(values))
    redis.call('HDEL', from, unpack(moved))
  end
  st.split = st.split + 1
  if st.split >= size then
    st.level = st.level + 1
    st.split = 0
  end
  redis.call('HSET', K('meta'), 'seen_level', st.level, 'seen_split', st.split)
end

-- Adds fingerprint `fp` (20 bytes) to the seen set; true when it was not in it.
local function seen_add(fp)
  local st = seen_state()
  local key = found('s:' .. seen_bucket(fp, st.level, st.split))
  if redis.call('HSETNX', key, string.sub(fp, 1, 16), '') == 0 then
    return false
  end
  st.count = st.count + 1
  redis.call('HSET', K('meta'), 'seen_count', st.count)
  while st.level < 32 and st.count > SEEN_LOAD * (2 ^ st.level + st.split) do
    seen_split(st)
  end
  return true
end

-- Queues the requests listed from ARGV[at] on (a count, then per request: host,
-- priority, dont_filter 0/1, fingerprint, request, host delay ms): each passes
-- the seen set unless it bypasses it. Counts them; returns how many were
-- queued, filtered and new to the seen set, and the set of hosts whose queues
-- grew.
local function queue_requests(at)
  local queued, filtered, unique = 0, 0, 0
  local touched = {}
  local requests = tonumber(ARGV[at])
  for i = 0, requests - 1 do
    local r = at + 1 + i * 6
    local rhost, priority, dont_filter, fp, body, delay =
      ARGV[r], ARGV[r + 1], ARGV[r + 2], ARGV[r + 3], ARGV[r + 4], ARGV[r + 5]
    local new = seen_add(fp)
    if new then
      unique = unique + 1
    end
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
  count('seen/unique', unique)
  return queued, filtered, unique, touched
end
