-- Queues a part of the links of the page leased as ARGV[5] by worker ARGV[4],
-- ahead of the page's completion (a page with many links hands them on in
-- parts while its legs run). ARGV[6] on: the requests, as complete.lua takes
-- them. A lease that is no longer this worker's writes nothing: its page is
-- fetched again, and its links with it. Sent twice (a retry after a lost
-- reply), the links are found in the seen set the second time.
--
-- Returns {0} when the lease is gone, {2, queued, filtered, unique} when done.
local worker, token = ARGV[4], ARGV[5]
local owner = redis.call('HGET', K('lease:' .. token), 'worker')
if owner ~= worker then
  return {0}
end
local queued, filtered, unique, touched = queue_requests(6)
for h in pairs(touched) do
  refresh_host(h)
end
return {2, queued, filtered, unique}
