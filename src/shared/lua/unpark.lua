-- A worker starts: hosts parked because their robots.txt kept failing are
-- tried again, their set-aside requests back in the frontier in their places.
-- Returns how many requests came back.
local back = 0
local hosts = redis.call('HKEYS', K('parkedhosts'))
for _, host in ipairs(hosts) do
  local q, parked = found('q:' .. host), found('parked:' .. host)
  local n = redis.call('ZCARD', parked)
  if n > 0 then
    local before = redis.call('ZCARD', q)
    redis.call('ZUNIONSTORE', q, 2, q, parked, 'AGGREGATE', 'MIN')
    redis.call('DEL', parked)
    local added = redis.call('ZCARD', q) - before
    redis.call('HINCRBY', K('meta'), 'frontier', added)
    back = back + added
  end
  redis.call('HDEL', K('parkedhosts'), host)
  refresh_host(host)
end
count('robots/hosts_unparked', #hosts)
return back
