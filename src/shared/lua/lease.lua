-- Leases up to ARGV[5] requests for worker ARGV[4], for ARGV[6] ms each, from
-- the hosts whose politeness allows a start now: below the per-host in-flight
-- limit (checked again here: a job version may have lowered it since the host
-- became ready) and past their next allowed start, which each lease pushes
-- back by the host's delay (host_delay: the job's, else the host's default,
-- and at least its robots.txt Crawl-delay). When the job jitters (field
-- `jitter` of the `job` hash), each gap is the delay times a factor in
-- [0.5, 1.5), as the embedded crawl's: drawn from a Park-Miller generator
-- seeded by ARGV[7] (1 .. 2^31 - 2, the worker's random number), so the script
-- stays a function of its arguments.
-- Expired leases are reclaimed first, and the leases of workers whose
-- heartbeat stopped (common.lua, reap); the call is a beat of ARGV[4].
-- Returns {now, expired (or of a dead worker), frontier, live leases, ms until a host is ready (-1:
-- none queued), then token, host, request, page record ('' : none) for each
-- lease}; the page record is what a revisit is fetched against.
local worker, want, ttl = ARGV[4], tonumber(ARGV[5]), tonumber(ARGV[6])
local now = now_ms()
local jitter = redis.call('HGET', K('job'), 'jitter') == '1'
local seed = tonumber(ARGV[7] or '1') or 1
local function gap(delay)
  if not jitter then
    return delay
  end
  seed = (seed * 16807) % 2147483647
  return math.floor(delay * (0.5 + seed / 2147483647))
end
-- ARGV[8] names this call ('' : unnamed). A call retried after its reply was
-- lost (the same name) is answered with the leases the first one granted that
-- are still this worker's, and leases nothing more: they are not held by a
-- worker that never heard of them until their TTL runs out. Names are kept in
-- `leasecalls` (name -> tokens, space-separated) and `leasecalls_at` (by
-- time) for CALL_MEMORY ms.
local CALL_MEMORY = 600000
local call = ARGV[8] or ''
local function answer(out, expired)
  local wait = -1
  local first = redis.call('ZRANGE', K('ready'), 0, 0, 'WITHSCORES')
  if first[1] then
    wait = math.max(0, tonumber(first[2]) - now)
  end
  local frontier = tonumber(redis.call('HGET', K('meta'), 'frontier') or '0')
  local head = {now, expired, frontier, redis.call('ZCARD', K('leases')), wait}
  for _, v in ipairs(out) do
    head[#head + 1] = v
  end
  return head
end
if call ~= '' then
  local before = redis.call('HGET', K('leasecalls'), call)
  if before then
    local again = {}
    for token in string.gmatch(before, '%S+') do
      local lease = redis.call('HMGET', found('lease:' .. token), 'worker', 'host', 'member')
      if lease[1] == worker then
        again[#again + 1] = token
        again[#again + 1] = lease[2]
        again[#again + 1] = string.sub(lease[3], 21)
        again[#again + 1] = redis.call('HGET', K('pages'), string.sub(lease[3], 1, 20)) or ''
      end
    end
    count('leases/call_retried', 1)
    return answer(again, 0)
  end
  local old = redis.call('ZRANGEBYSCORE', K('leasecalls_at'), '-inf', now - CALL_MEMORY, 'LIMIT', 0, 100)
  if #old > 0 then
    redis.call('HDEL', K('leasecalls'), unpack(old))
    redis.call('ZREM', K('leasecalls_at'), unpack(old))
  end
end
local expired = reclaim(now, 1000) + reap(now, worker)
local out = {}
local got = 0
while got < want do
  local hosts = redis.call('ZRANGEBYSCORE', K('ready'), '-inf', now, 'LIMIT', 0, want - got)
  if #hosts == 0 then
    break
  end
  for _, host in ipairs(hosts) do
    local member, prio
    if tonumber(redis.call('HGET', K('inflight'), host) or '0') < PER_HOST then
      member, prio = pop(host)
    end
    if member then
      local token = next_token(now)
      redis.call('ZADD', K('leases'), now + ttl, token)
      redis.call('HSET', found('lease:' .. token), 'worker', worker, 'host', host,
        'prio', prio, 'member', member, 'at', now)
      redis.call('HINCRBY', K('meta'), 'frontier', -1)
      redis.call('HINCRBY', K('inflight'), host, 1)
      redis.call('HSET', K('next'), host, now + gap(host_delay(host)))
      got = got + 1
      -- The member (common.lua's push): fingerprint (20 bytes), request.
      local fp, body = string.sub(member, 1, 20), string.sub(member, 21)
      out[#out + 1] = token
      out[#out + 1] = host
      out[#out + 1] = body
      out[#out + 1] = redis.call('HGET', K('pages'), fp) or ''
    end
    refresh_host(host)
  end
end
count('leases/granted', got)
if call ~= '' and got > 0 then
  local tokens = {}
  for i = 1, #out, 4 do
    tokens[#tokens + 1] = out[i]
  end
  redis.call('HSET', K('leasecalls'), call, table.concat(tokens, ' '))
  redis.call('ZADD', K('leasecalls_at'), now, call)
end
return answer(out, expired)
