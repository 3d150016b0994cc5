-- A worker starts: hosts parked because their robots.txt kept failing are
-- tried again, their set-aside requests back in the frontier, ahead of those
-- of their priority queued since (common.lua's move_queue).
-- Returns how many requests came back.
local back = 0
local hosts = redis.call('HKEYS', K('parkedhosts'))
for _, host in ipairs(hosts) do
  local added = move_queue(host, false)
  redis.call('HINCRBY', K('meta'), 'frontier', added)
  back = back + added
  redis.call('HDEL', K('parkedhosts'), host)
  refresh_host(host)
end
count('robots/hosts_unparked', #hosts)
return back
