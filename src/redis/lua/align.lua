-- align.lua — bring jobs that Redis holds at an older version than MySQL (or at the version
-- MySQL ended them at) in line with MySQL
-- (the two-way restore, after Redis came back from a snapshot or a failover that lost writes).
-- Atomic per job and safe beside live traffic: a job whose version is no longer the one the
-- daemon read (it moved on meanwhile) is left to its newer state.
-- KEYS[1] = <prefix>:{<shard>}:jobs
-- ARGV    = now, who, n, then n groups of 6:
--           idkey, seen_ver (the version jobscan read), mysql_state, mysql_ver, runAt, attempts
--           (mysql_state: 1..6 as below, 7 = aborted, 8 = far)
-- What MySQL says wins:
--   finished, deleted, aborted  the job leaves Redis (bizKey released, a tombstone while a
--                               restore runs); nothing is journaled — MySQL already says so;
--   dead                        the job is dead in Redis too, at MySQL's version;
--   delayed, ready, reserved    the job takes MySQL's runAt and attempts and is placed by
--                               them; a reserved one lost its lease: ready again, or dead on
--                               its last try (as restore.lua); journaled as a transition.
-- Returns one entry per job: {"removed", from} | {"aligned", state, ver} | {"moved", ver}
--                            | {"missing"}
local now, who, n = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3])
local ABORTED = 7
local out = {}
local earliest = nil
for i = 0, n - 1 do
    local a = 4 + i * 6
    local idkey, seen, mst, mver = ARGV[a], tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3])
    local j = load_job(idkey)
    if not j then
        out[#out + 1] = { "missing" }
    elseif j.ver ~= seen or mver < j.ver
        or (mver == j.ver and mst ~= FINISHED and mst ~= DELETED and mst ~= ABORTED) then
        -- the same version is one history unless MySQL ended the job there: a job ends by
        -- leaving Redis, so holding it at the version of its end means Redis was rolled back
        -- and a move after the rollback reached that version (restore.c); the end wins
        out[#out + 1] = { "moved", j.ver }
    elseif mst == FAR then
        -- MySQL alone holds it (rescheduled beyond the horizon after this copy was paged in):
        -- it leaves Redis, keeping its bizKey in the far form; the pager brings it back in time
        local from = j.st
        unplace(idkey, j, now)
        redis.call("HDEL", K_JOBS, idkey)
        if j.biz ~= "" and biz_holder(j.topic, j.biz) == idkey then
            redis.call("HSET", biz_key(j.topic), j.biz, idkey .. "@" .. ARGV[a + 4])
        end
        out[#out + 1] = { "removed", from }
    elseif mst == FINISHED or mst == DELETED or mst == ABORTED then
        local from = j.st
        unplace(idkey, j, now)
        redis.call("HDEL", K_JOBS, idkey)
        biz_release(idkey, j)
        tombstone(idkey, now)
        out[#out + 1] = { "removed", from }
    else
        unplace(idkey, j)
        j.att, j.runat = tonumber(ARGV[a + 5]), tonumber(ARGV[a + 4])
        if mst == DEAD or (mst == RESERVED and j.att >= j.tries) then
            biz_release(idkey, j)
            j.st = DEAD
            redis.call("ZADD", dead_key(j.topic), now, idkey)
            count(DEAD, j.topic, 1)
            if j.grp then GL.g_unhold(j, now) end
        else
            place(idkey, j, now)
            if j.biz ~= "" and not redis.call("HGET", biz_key(j.topic), j.biz) then
                redis.call("HSET", biz_key(j.topic), j.biz, idkey) -- a dead job had let it go
            end
            if j.st == DELAYED and (not earliest or j.runat < earliest[2]) then earliest = { idkey, j.runat } end
        end
        if mst == DEAD then
            j.ver = mver -- MySQL says so already: nothing to journal
        else
            j.ver = mver + 1
            log_transition(idkey, mst, j.st, j, now, "jobs", who)
        end
        save_job(idkey, j)
        out[#out + 1] = { "aligned", j.st, j.ver }
    end
end
if earliest then wake_if_head(earliest[1]) end
publish_ready()
return out
