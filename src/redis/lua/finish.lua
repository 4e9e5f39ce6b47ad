-- finish.lua — acknowledge a reserved job: it is done and leaves Redis (lib.lua finish_job).
-- KEYS[1] = <prefix>:{<shard>}:jobs
-- ARGV    = idkey, now, attempt (0 = any; otherwise must match the delivery being acked), who,
--           [key: the transition's actor key, default "jobs"; a delivery route names its
--           outcome, e.g. "webhook:200"]
-- Returns {"ok", ver, attempts, runAt} | {"missing"} | {"state", state} | {"stale", attempts}
local out = finish_job(ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4], ARGV[5] or "jobs")
publish_ready()
return out
