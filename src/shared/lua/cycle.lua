-- Starts a new cycle of a drained crawl, or queues more of the current
-- cycle's due pages. ARGV[3] is the cycle the worker read: with ARGV[4] = 'start'
-- the call starts cycle ARGV[3] + 1 only if the crawl is still on cycle
-- ARGV[3] and drained (nothing queued, no live lease) — so of workers starting
-- together exactly one starts it — and records its start time ARGV[5]; with
-- 'more' it only queues, while the crawl is on cycle ARGV[3].
-- Then a count and, per request: kind ('s' seed, 'd' due page), URL, host,
-- fingerprint, request (JSON), host delay ms, priority. A seed is queued again
-- (and kept in the seed set); a due page is queued only if it is still in the
-- due index, which it leaves, so no page is queued twice however often this
-- runs. Returns -1 when the guard fails, else how many were queued.
local cycle, mode, started = tonumber(ARGV[3]), ARGV[4], ARGV[5]
local current = tonumber(redis.call('HGET', P .. 'meta', 'cycle') or '1')
if mode == 'start' then
  local frontier = tonumber(redis.call('HGET', P .. 'meta', 'frontier') or '0')
  if current ~= cycle or frontier > 0 or redis.call('ZCARD', P .. 'leases') > 0 then
    return -1
  end
  current = cycle + 1
  redis.call('HSET', P .. 'meta', 'cycle', current, 'cycle_started', started)
  count('cycle/started', 1)
elseif current ~= cycle then
  return -1
end
local queued, seeds, due = 0, 0, 0
local n = tonumber(ARGV[6])
for i = 0, n - 1 do
  local at = 7 + i * 7
  local kind, url, host, fp, body, delay, priority =
    ARGV[at], ARGV[at + 1], ARGV[at + 2], ARGV[at + 3], ARGV[at + 4], ARGV[at + 5], ARGV[at + 6]
  local go = false
  if kind == 's' then
    redis.call('SADD', P .. 'seeds', url)
    redis.call('SADD', P .. 'seen', fp)
    redis.call('ZREM', P .. 'due', fp)
    go = true
    seeds = seeds + 1
  elseif redis.call('ZREM', P .. 'due', fp) == 1 then
    go = true
    due = due + 1
  end
  if go then
    push(host, priority, fp, body, delay)
    refresh_host(host)
    queued = queued + 1
  end
end
count('revisit/seeds', seeds)
count('revisit/due', due)
count('frontier/enqueued', queued)
return queued
