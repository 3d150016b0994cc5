-- Worker ARGV[4] is alive: its heartbeat (common.lua, reap), which also
-- returns the leases of workers whose heartbeat stopped.
-- Returns {leases returned, 1 when ARGV[4] was not in `beats` (its first
-- beat, or it had been taken for dead), else 0}.
local worker = ARGV[4]
local now = now_ms()
local absent = redis.call('ZSCORE', K('beats'), worker) == false and 1 or 0
local n = reap(now, worker)
return {n, absent}
