-- delete.lua — cancel a job in any live state (delayed, ready, reserved) or a dead one.
-- KEYS[1] = <prefix>:{<shard>}:jobs
-- ARGV    = idkey, now
-- Returns {"ok", from_state, ver, attempts, runAt} | {"missing"}
local idkey, now = ARGV[1], tonumber(ARGV[2])
local j = load_job(idkey)
if not j then return { "missing" } end
unplace(idkey, j)
redis.call("HDEL", K_JOBS, idkey)
biz_release(idkey, j)
tombstone(idkey, now)
return { "ok", j.st, j.ver + 1, j.att, j.runat }
