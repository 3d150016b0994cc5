#!lua
-- A worker joins a crawl: returns {the crawl's epoch, 1 if made now}. Not
-- prefixed by common.lua: its keys are declared. KEYS[1] the `meta` hash,
-- KEYS[2] the `job` hash; ARGV[1] a new random epoch.
--
-- The epoch is made with the crawl (or adopted by a crawl an earlier
-- legcrawl made without one); every other script checks it (common.lua). A
-- crawl whose job is stored but whose `meta` is gone lost its state: {'', 0}.
local epoch = redis.call('HGET', KEYS[1], 'epoch')
if epoch then
  return {epoch, 0}
end
if redis.call('EXISTS', KEYS[1]) == 0 and redis.call('EXISTS', KEYS[2]) == 1 then
  return {'', 0}
end
redis.call('HSET', KEYS[1], 'epoch', ARGV[1])
return {ARGV[1], 1}
