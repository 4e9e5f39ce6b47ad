-- reschedule.lua — move a delayed or ready job's due time to runAt.
-- KEYS[1] = <prefix>:{<shard>}:jobs
-- ARGV    = idkey, now, runAt, who
-- Returns {"ok", from_state, state, runAt, ver, attempts} | {"missing"} | {"state", state}
local idkey, now, runat, who = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4]
local j = load_job(idkey)
if not j then return { "missing" } end
if j.st ~= DELAYED and j.st ~= READY then return { "state", j.st } end
local from = j.st
unplace(idkey, j)
j.runat = runat
j.ver = j.ver + 1
place(idkey, j, now)
save_job(idkey, j)
log_transition(idkey, from, j.st, j, now, "jobs", who)
if j.st == DELAYED then wake_if_head(idkey) end
publish_ready()
return { "ok", from, j.st, j.runat, j.ver, j.att }
