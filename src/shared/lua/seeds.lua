-- Stores seeds: ARGV[4] = count, then per seed: url, host, fingerprint,
-- request, host delay (ms). A URL new to the seed set is queued (it bypasses
-- the seen set, like every seed) and its fingerprint recorded as seen; a known
-- one is not queued again. The last argument is the time (unix seconds) a new
-- crawl's first cycle starts. Returns {new seeds, fingerprints new to the
-- seen set, 1 when this call made the crawl (its first cycle) else 0}. Called
-- in chunks:
-- each seed is stored and queued once, whichever chunk or retry brings it.
local added, unique = 0, 0
-- A cycle being seeded (cycle.lua) must not queue this seed again.
local seeding = redis.call('HGET', K('meta'), 'seeding') == '1'
local n = tonumber(ARGV[4])
for i = 0, n - 1 do
  local at = 5 + i * 5
  local url, host, fp, body, delay = ARGV[at], ARGV[at + 1], ARGV[at + 2], ARGV[at + 3], ARGV[at + 4]
  if redis.call('SADD', K('seeds'), url) == 1 then
    if seen_add(fp) then
      unique = unique + 1
    end
    if seeding then
      redis.call('SADD', K('seeded'), fp)
    end
    push(host, 0, fp, body, delay)
    refresh_host(host)
    added = added + 1
  end
end
local created = 0
if redis.call('HSETNX', K('meta'), 'created', now_ms()) == 1 then
  redis.call('HSET', K('meta'), 'schema', 2, 'cycle', 1, 'cycle_started', ARGV[#ARGV])
  count('cycle/started', 1)
  created = 1
end
count('frontier/enqueued', added)
count('seen/unique', unique)
return {added, unique, created}
