-- release.lua — give a reserved job back (nack): due again after `delay` ms (0 = ready now).
-- The delivery still counts toward `tries`.
-- KEYS[1] = <prefix>:{<shard>}:jobs
-- ARGV    = idkey, now, delay, attempt (0 = any), who
-- Returns {"ok", state, runAt, ver, attempts} | {"missing"} | {"state", state} | {"stale", attempts}
local idkey, now, delay, attempt, who = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), ARGV[5]
local j = load_job(idkey)
if not j then return { "missing" } end
if j.st ~= RESERVED then return { "state", j.st } end
if attempt ~= 0 and attempt ~= j.att then return { "stale", j.att } end
unplace(idkey, j)
j.runat = now + delay
j.ver = j.ver + 1
place(idkey, j, now)
save_job(idkey, j)
log_transition(idkey, RESERVED, j.st, j, now, "jobs", who)
if j.st == DELAYED then wake_if_head(idkey) end
publish_ready()
return { "ok", j.st, j.runat, j.ver, j.att }
