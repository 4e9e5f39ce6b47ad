-- touch.lua — extend a reserved job's lease to now + ttr.
-- KEYS[1] = <prefix>:{<shard>}:jobs
-- ARGV    = idkey, now, attempt (0 = any)
-- Returns {"ok", leaseUntil} | {"missing"} | {"state", state} | {"stale", attempts}
local idkey, now, attempt = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local j = load_job(idkey)
if not j then return { "missing" } end
if j.st ~= RESERVED then return { "state", j.st } end
if attempt ~= 0 and attempt ~= j.att then return { "stale", j.att } end
local lease = now + j.ttr
redis.call("ZADD", K_DELAY, lease, idkey)
return { "ok", lease }
