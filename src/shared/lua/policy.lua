-- Moves pages' due times to follow a changed revisit policy (a worker calls
-- it in chunks over the page records before it starts a new cycle, as the
-- embedded state does). ARGV[4] = count, then per page: fingerprint, the
-- record as the worker read it, the record with its new due time, that due
-- time in unix seconds ('' : never due), and '1' when the page had a due time.
-- A page whose record changed since it was read, or that had a due time but
-- is no longer in the due index (it is queued or leased now), is left alone.
-- Returns how many moved.
local moved = 0
local n = tonumber(ARGV[4])
for i = 0, n - 1 do
  local at = 5 + i * 5
  local fp, old, new, due, had = ARGV[at], ARGV[at + 1], ARGV[at + 2], ARGV[at + 3], ARGV[at + 4]
  if redis.call('HGET', K('pages'), fp) == old
      and (had ~= '1' or redis.call('ZSCORE', K('due'), fp)) then
    redis.call('HSET', K('pages'), fp, new)
    if due == '' then
      redis.call('ZREM', K('due'), fp)
    else
      redis.call('ZADD', K('due'), tonumber(due), fp)
    end
    moved = moved + 1
  end
end
count('revisit/rescheduled', moved)
return moved
