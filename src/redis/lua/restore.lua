-- restore.lua — insert jobs read back from MySQL, only where Redis lacks them. /reStore uses
-- it, and so does the pager (src/durable/pager.c) for far jobs (mysql_state FAR): the far job's own
-- bizKey entry ("<idkey>@<runAt>") becomes a plain one, and a copy of the job that an older
-- read of its row put in Redis (version not above the row's) is replaced by the row.
-- Idempotent and safe beside live traffic: a job Redis holds is left alone, a job that
-- finished or was deleted while this restore ran (tombstone) is not brought back, and a
-- bizKey already held by another live job is not taken from it.
-- A job that was reserved when Redis lost it has lost its lease: like an expired lease it
-- becomes ready again, or dead when that delivery was its last try. A grouped job's group
-- counts are rebuilt from the jobs put back (lib.lua place): a reserved one holds no slot any
-- more, so nothing is counted twice.
-- KEYS[1] = <prefix>:{<shard>}:jobs
-- ARGV    = now, expire (1 = put overdue jobs back as ready, 0 = leave them), who,
--           journal (1 = log each job put back in the outbox; 0 = the caller writes the
--           transitions to MySQL itself, as the pager does in its own commit), n,
--           then n groups of 12:
--           idkey, topic, body, runAt, priority, ttr, tries, bizKey, attempts, ver, mysql_state,
--           tail (ver is the MySQL row's version; mysql_state its state number; tail the job's
--           own backoff and trace context, lib.lua unpack_tail: '' = neither)
-- Returns one entry per job: {"restored", state, ver} | {"present", state} | {"gone"}
--                            | {"bizheld", idkey} | {"expired"}
--
-- Cost: the pager calls it for every far job, a million in a minute at peak, and a call holds
-- Redis for all of it. So, as in push.lua, the writes of the jobs put back are gathered and
-- made by a few multi-element commands at the end (records, delay zset, ready zsets, counters);
-- only the lookups (is it here, is it tombstoned, who holds its bizKey) are per job. Two jobs
-- of one call never share a bizKey (MySQL keeps at most one live job per key), so gathering
-- cannot change what a later lookup of the same call sees.
local now, expire, who, journal = tonumber(ARGV[1]), ARGV[2] == "1", ARGV[3], ARGV[4] == "1"
local n = tonumber(ARGV[5])
local out = {}
local earliest = nil     -- the soonest delayed job put back: one wake-up for the whole batch
for i = 0, n - 1 do
    local a = 6 + i * 12
    local idkey, topic, body = ARGV[a], ARGV[a + 1], ARGV[a + 2]
    local runat = tonumber(ARGV[a + 3])
    local present = redis.call("HEXISTS", K_JOBS, idkey) == 1
    if present and tonumber(ARGV[a + 10]) == FAR then
        -- The pager: a copy at or below this row's version was paged in from an older read of
        -- the row (it was rescheduled since, and that pager's step is still to find out): the
        -- row is newer, so it replaces the copy (as align.lua lets MySQL's newer state win).
        local ex = load_job(idkey)
        if ex.ver <= tonumber(ARGV[a + 9]) and (ex.st == DELAYED or ex.st == READY) then
            unplace(idkey, ex)
            redis.call("HDEL", K_JOBS, idkey)
            present = false
        end
    end
    if present then
        out[#out + 1] = { "present", load_job(idkey).st }
    elseif redis.call("ZSCORE", base .. "gone", idkey) then
        out[#out + 1] = { "gone" }
    elseif not expire and runat <= now then
        out[#out + 1] = { "expired" }
    else
        local biz = ARGV[a + 7]
        local holder, far_runat = nil, nil
        if biz ~= "" then holder, far_runat = biz_holder(topic, biz) end
        local held = false
        if holder and holder ~= idkey then
            if far_runat then
                held = true -- another far job holds it
            else
                local hj = load_job(holder)
                held = hj ~= nil and is_live(hj.st)
            end
        end
        if held then
            out[#out + 1] = { "bizheld", holder }
        else
            local bo, tp, ts, grp = unpack_tail(ARGV[a + 11])
            local j = { ver = tonumber(ARGV[a + 9]) + 1, att = tonumber(ARGV[a + 8]),
                        prio = tonumber(ARGV[a + 4]), ttr = tonumber(ARGV[a + 5]), tries = tonumber(ARGV[a + 6]),
                        runat = runat, topic = topic, biz = biz, body = body, bo = bo, tp = tp, ts = ts, grp = grp }
            if tonumber(ARGV[a + 10]) == RESERVED and j.att >= j.tries then
                j.st = DEAD
                redis.call("ZADD", dead_key(topic), now, idkey)
                count(DEAD, topic, 1)
                save_job(idkey, j)
            else
                j.st = runat > now and DELAYED or READY
                if j.st == DELAYED and (not earliest or runat < earliest[2]) then earliest = { idkey, runat } end
                if biz ~= "" then redis.call("HSET", biz_key(topic), biz, idkey) end
                if grp then
                    -- counted in its group as it goes in (never twice: a job present is left
                    -- alone above); under fifo a job waiting for a retry (delayed after an
                    -- attempt) holds its group's slot, as it did before Redis lost it
                    if j.st == DELAYED and j.att > 0 and tonumber(ARGV[a + 10]) == DELAYED and GL.gconf(topic).gfifo then
                        j.hold = 1
                        GL.g_change(j, nil, nil, 1, nil)
                    end
                    place(idkey, j, now)
                    save_job(idkey, j)
                else
                    gather(idkey, pack_job(j), j.st, topic, ARGV[a + 3], j.prio)
                end
            end
            if journal then log_transition(idkey, tonumber(ARGV[a + 10]), j.st, j, now, "jobs", who) end
            out[#out + 1] = { "restored", j.st, j.ver }
        end
    end
end
write_gathered()
if earliest then wake_if_head(earliest[1]) end
publish_ready()
return out
