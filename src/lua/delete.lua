-- delete.lua — cancel a job in any live state (delayed, ready, reserved) or a dead one.
-- KEYS[1] = <prefix>:{<shard>}:jobs
-- ARGV    = idkey, now, who
-- Returns {"ok", from_state, ver, attempts, runAt} | {"missing"}
local idkey, now, who = ARGV[1], tonumber(ARGV[2]), ARGV[3]
local j = load_job(idkey)
if not j then return { "missing" } end
unplace(idkey, j)
redis.call("HDEL", K_JOBS, idkey)
biz_release(idkey, j)
tombstone(idkey, now)
local from = j.st
j.ver = j.ver + 1
log_transition(idkey, from, DELETED, j, now, "jobs", who)
return { "ok", from, j.ver, j.att, j.runat }
