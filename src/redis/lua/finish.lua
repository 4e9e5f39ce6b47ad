-- finish.lua — acknowledge a reserved job: it is done and leaves Redis.
-- KEYS[1] = <prefix>:{<shard>}:jobs
-- ARGV    = idkey, now, attempt (0 = any; otherwise must match the delivery being acked), who,
--           [key: the transition's actor key, default "jobs"; a delivery route names its
--           outcome, e.g. "webhook:200"]
-- Returns {"ok", ver, attempts, runAt} | {"missing"} | {"state", state} | {"stale", attempts}
local idkey, now, attempt, who = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4]
local key = ARGV[5] or "jobs"
local j = load_job(idkey)
if not j then return { "missing" } end
if j.st ~= RESERVED then return { "state", j.st } end
if attempt ~= 0 and attempt ~= j.att then return { "stale", j.att } end
unplace(idkey, j, now) -- a grouped job's slot frees with it: its group's turn may come again
redis.call("HDEL", K_JOBS, idkey)
biz_release(idkey, j)
tombstone(idkey, now)
j.ver = j.ver + 1
log_transition(idkey, RESERVED, FINISHED, j, now, key, who)
publish_ready()
return { "ok", j.ver, j.att, j.runat }
