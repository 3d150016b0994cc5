-- Starts a new cycle of a drained crawl, or queues more of the current
-- cycle's seeds and due pages, a chunk per call (no call holds Redis long).
-- ARGV[4] is the cycle the worker read; ARGV[5] the mode:
--   'start'  starts cycle ARGV[4] + 1 only if the crawl is still on cycle
--            ARGV[4] and drained (nothing queued, no live lease) — so of
--            workers starting together exactly one starts it — records its
--            start time ARGV[6] and its revisit budget ARGV[7] ('' for none)
--            and marks it `seeding`;
--   'more'   only queues, while the crawl is on cycle ARGV[4];
--   'seeded' says every seed of the cycle was sent: `seeding` ends.
-- Then a count and, per request: kind ('s' seed, 'd' due page, 'b' a page
-- chosen by the revisit budget), URL, host, fingerprint, request (JSON), host
-- delay ms, priority.
--
-- A seed is queued while the cycle is `seeding`, once per cycle: the
-- `seeded` set holds the fingerprints of the seeds queued in this cycle (made
-- empty when a cycle starts). A worker killed between chunks leaves `seeding`
-- set, and the next worker that starts sends every seed again: only those not
-- in `seeded` are queued. A due page is queued only if it is still in the due
-- index, which it leaves, so no page is queued twice however often this runs.
-- A budgeted page likewise, and only while the cycle's `budget_left` is above
-- 0, which it lowers: however many workers send their choice, the cycle
-- queues at most its budget.
-- Returns -1 when the guard fails, else {queued, seeds, due pages, new to
-- the seen set}.
local cycle, mode, started = tonumber(ARGV[4]), ARGV[5], ARGV[6]
local current = tonumber(redis.call('HGET', K('meta'), 'cycle') or '1')
if mode == 'start' then
  local frontier = tonumber(redis.call('HGET', K('meta'), 'frontier') or '0')
  if current ~= cycle or frontier > 0 or redis.call('ZCARD', K('leases')) > 0 then
    return -1
  end
  current = cycle + 1
  redis.call('HSET', K('meta'), 'cycle', current, 'cycle_started', started, 'seeding', 1)
  if ARGV[7] == '' then
    redis.call('HDEL', K('meta'), 'budget_left')
  else
    redis.call('HSET', K('meta'), 'budget_left', ARGV[7])
  end
  -- UNLINK frees a large set in the background.
  redis.call('UNLINK', K('seeded'))
  count('cycle/started', 1)
elseif current ~= cycle then
  return -1
elseif mode == 'seeded' then
  redis.call('HDEL', K('meta'), 'seeding')
  redis.call('UNLINK', K('seeded'))
  return {0, 0, 0, 0}
end
local seeding = redis.call('HGET', K('meta'), 'seeding') == '1'
local queued, seeds, due, unique, budgeted = 0, 0, 0, 0, 0
local left = tonumber(redis.call('HGET', K('meta'), 'budget_left') or '0')
local n = tonumber(ARGV[8])
for i = 0, n - 1 do
  local at = 9 + i * 7
  local kind, url, host, fp, body, delay, priority =
    ARGV[at], ARGV[at + 1], ARGV[at + 2], ARGV[at + 3], ARGV[at + 4], ARGV[at + 5], ARGV[at + 6]
  local go = false
  if kind == 's' then
    if seeding and redis.call('SADD', K('seeded'), fp) == 1 then
      redis.call('SADD', K('seeds'), url)
      if seen_add(fp) then
        unique = unique + 1
      end
      redis.call('ZREM', K('due'), fp)
      go = true
      seeds = seeds + 1
    end
  elseif kind == 'b' then
    if left > 0 and redis.call('ZREM', K('due'), fp) == 1 then
      left = left - 1
      go = true
      due = due + 1
      budgeted = budgeted + 1
    end
  elseif redis.call('ZREM', K('due'), fp) == 1 then
    go = true
    due = due + 1
  end
  if go then
    push(host, priority, fp, body, delay)
    refresh_host(host)
    queued = queued + 1
  end
end
if budgeted > 0 then
  redis.call('HSET', K('meta'), 'budget_left', left)
end
count('revisit/seeds', seeds)
count('revisit/due', due)
count('revisit/budgeted', budgeted)
count('frontier/enqueued', queued)
count('seen/unique', unique)
return {queued, seeds, due, unique}
