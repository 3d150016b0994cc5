#!lua flags=no-writes
--!df flags=allow-undeclared-keys
-- Whether a fingerprint is in the crawl's seen set (`legcrawl dump --shared
-- ... seen URL`): 1 or 0. Not prefixed by common.lua (it writes nothing and
-- checks no epoch: dump reads a crawl without joining it), so it reads on a
-- replica and while the server is out of memory.
--
-- KEYS[1] the `meta` hash; ARGV[1] the crawl's key prefix, ARGV[2] the
-- fingerprint (20 bytes). The seen set's buckets `s:N` are found from the
-- level and split pointer in `meta` (common.lua explains the layout), read in
-- the same call, so a split between two reads cannot hide a fingerprint; the
-- bucket key is built from the prefix, as common.lua's found() does: same hash
-- tag, same Redis Cluster slot.
if KEYS[1] ~= ARGV[1] .. 'meta' then
  return redis.error_reply('LEGCRAWL_KEYS KEYS[1] is not the meta key of the prefix in ARGV[1]')
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

local fp = ARGV[2]
local m = redis.call('HMGET', KEYS[1], 'seen_level', 'seen_split')
local bucket = seen_bucket(fp, tonumber(m[1] or '0'), tonumber(m[2] or '0'))
return redis.call('HEXISTS', ARGV[1] .. 's:' .. bucket, string.sub(fp, 1, 16))
