#!lua
-- Stores the next version of the crawl's job, only if the newest stored one
-- is still the version the worker resolved against (compare-and-set: of two
-- workers changing the job at once, the second re-reads and resolves again).
-- Not prefixed by common.lua: its keys are declared.
--
-- KEYS[1] the `job` hash (`version`, and the politeness the scripts read:
-- `per_host`, `delay`, `jitter`), KEYS[2] the `jobs` hash (version -> record).
-- ARGV[1] the version resolved against (0: none stored), ARGV[2] the new
-- version's record (JSON), ARGV[3] its per-host limit, ARGV[4] its delay in ms
-- ('' : none, each host's default applies), ARGV[5] '1' when each gap is
-- jittered ('' : not).
--
-- Returns {1, version} when stored, {0, newest version} when another worker
-- stored one first (nothing written).
local current = tonumber(redis.call('HGET', KEYS[1], 'version') or '0')
if current ~= tonumber(ARGV[1]) then
  return {0, current}
end
local version = current + 1
redis.call('HSET', KEYS[2], version, ARGV[2])
redis.call('HSET', KEYS[1], 'version', version, 'per_host', ARGV[3])
if ARGV[4] == '' then
  redis.call('HDEL', KEYS[1], 'delay')
else
  redis.call('HSET', KEYS[1], 'delay', ARGV[4])
end
if ARGV[5] == '1' then
  redis.call('HSET', KEYS[1], 'jitter', '1')
else
  redis.call('HDEL', KEYS[1], 'jitter')
end
return {1, version}
