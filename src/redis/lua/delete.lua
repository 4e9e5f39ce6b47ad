-- delete.lua — cancel a job in any live state (delayed, ready, reserved) or a dead one.
-- KEYS[1] = <prefix>:{<shard>}:jobs
-- ARGV    = idkey, now, who[, version]: with a version (the reconciler carrying out a delete
--           whose COMMIT was in doubt), only a job still at that version is deleted
-- Returns {"ok", from_state, ver, attempts, runAt} | {"missing"} | {"lost"} | {"moved", ver}
-- A client's delete runs after its row committed as deleted in MySQL. A job missing here by then
-- either ended meanwhile (a finish, a delete: its own transition, newer, follows through the
-- outbox) — "missing" — or went with Redis's data: "lost" when the shard's marks (mark.lua,
-- written every second by every instance) are gone too, and then the delete's commit is the
-- job's last word. Either way, while a restore runs, its tombstone keeps a snapshot read before
-- that commit from bringing it back.
local idkey, now, who, want = ARGV[1], tonumber(ARGV[2]), ARGV[3], tonumber(ARGV[4])
local j = load_job(idkey)
if not j then
    if want then return { "missing" } end
    tombstone(idkey, now)
    return { redis.call("EXISTS", base .. "marks") == 0 and "lost" or "missing" }
end
if want and j.ver ~= want then return { "moved", j.ver } end
local from = delete_job(idkey, j, now, who)
return { "ok", from, j.ver, j.att, j.runat }
