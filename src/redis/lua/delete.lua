-- delete.lua — cancel a job in any live state (delayed, ready, reserved) or a dead one.
-- KEYS[1] = <prefix>:{<shard>}:jobs
-- ARGV    = idkey, now, who[, version]: with a version (the reconciler carrying out a delete
--           whose COMMIT was in doubt), only a job still at that version is deleted
-- Returns {"ok", from_state, ver, attempts, runAt} | {"missing"} | {"moved", ver}
-- A client's delete runs after its row committed as deleted in MySQL; a job missing here by then
-- (it ended meanwhile, or Redis lost it) stays deleted: while a restore runs, its tombstone keeps
-- a snapshot read before that commit from bringing it back.
local idkey, now, who, want = ARGV[1], tonumber(ARGV[2]), ARGV[3], tonumber(ARGV[4])
local j = load_job(idkey)
if not j then
    if not want then tombstone(idkey, now) end
    return { "missing" }
end
if want and j.ver ~= want then return { "moved", j.ver } end
local from = delete_job(idkey, j, now, who)
return { "ok", from, j.ver, j.att, j.runat }
