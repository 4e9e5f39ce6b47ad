-- move.lua — the mover's step on one shard: make due jobs ready and expire leases.
-- KEYS[1] = <prefix>:{<shard>}:jobs
-- ARGV    = now, limit, who
-- A due entry of the delay zset is either a delayed job (-> ready) or a reserved job whose
-- lease ran out (-> ready for another delivery, or delayed by its backoff (lib.lua
-- backoff_delay), or dead when it had its `tries` deliveries).
-- Each record is checked: a missing or corrupt one is set aside (lib.lua set_aside) and
-- counted, its entry still leaves the zset, and the rest of the batch is still moved.
-- The records, zset entries and counters are written once at the end (lib.lua gathered()).
-- A grouped job (lib.lua "Flow control by key") is placed at once (lib.lua place): its group's
-- counts and turn follow, and a slot it held is given back — except under fifo while it waits
-- out its retry's backoff, so that its group's next job waits for it.
-- On a fenced shard (mark.lua: Redis rolled back) nothing moves: {now + FENCE_RETRY_MS, 0, 0}.
-- Returns {next_due or -1, more (0/1), n, then n transitions of 6:
--          idkey, from_state, to_state, ver, attempts, runAt,
--          then, only when records were set aside, their number}
local now = tonumber(ARGV[1])
local limit, who = tonumber(ARGV[2]), ARGV[3]
-- a rolled-back shard moves nothing until its fence check has run (mark.lua): look again soon
if fenced() then return { now + FENCE_RETRY_MS, 0, 0 } end
local due = redis.call("ZRANGEBYSCORE", K_DELAY, "-inf", now, "LIMIT", 0, limit)
-- every due entry leaves the zset (a job that waits out a backoff is put back below): they are
-- its first #due ranks
if #due > 0 then redis.call("ZREMRANGEBYRANK", K_DELAY, 0, #due - 1) end
local trans = {}
local bad = 0
local confs = {} -- topic -> its settings, looked up once per call
for _, idkey in ipairs(due) do
    local j, why, rec = check_job(idkey)
    if not j then
        bad = bad + 1
        set_aside(idkey, why, rec)
    elseif j.st == DELAYED or j.st == RESERVED then
        local from = j.st
        count_later(from, j.topic, -1)
        if j.grp then GL.g_change(j, from, nil, 0, nil) end
        if from == RESERVED and j.att >= j.tries then
            j.st = DEAD
            redis.call("ZADD", dead_key(j.topic), now, idkey)
            biz_release(idkey, j)
            count_later(DEAD, j.topic, 1)
            if j.grp then GL.g_unhold(j, now) end
        elseif j.grp then
            local pause = 0
            if from == RESERVED then pause = backoff_delay(j, GL.gconf(j.topic)) end
            if pause > 0 then j.runat = now + pause end
            place(idkey, j, now, from == RESERVED and now or j.runat) -- written now, counted too
        else
            -- a redelivery waits out its topic's backoff (or the job's own), or is due now; a
            -- delayed job keeps its own due time for ordering
            local pause = 0
            if from == RESERVED then
                local conf = confs[j.topic]
                if not conf then
                    conf = topic_conf(j.topic)
                    confs[j.topic] = conf
                end
                pause = backoff_delay(j, conf)
            end
            if pause > 0 then
                j.st = DELAYED
                j.runat = now + pause
                delay_later(idkey, j.runat)
                count_later(DELAYED, j.topic, 1)
            else
                local at = (from == RESERVED) and now or j.runat
                j.st = READY
                ready_later(idkey, j.topic, ready_score(j.prio, at))
                count_later(READY, j.topic, 1)
            end
        end
        j.ver = j.ver + 1
        save_later(idkey, pack_job(j))
        log_transition(idkey, from, j.st, j, now, "delay", who)
        local t = #trans
        trans[t + 1], trans[t + 2], trans[t + 3] = idkey, from, j.st
        trans[t + 4], trans[t + 5], trans[t + 6] = j.ver, j.att, j.runat
    end
end
write_gathered()
publish_ready()
local head = redis.call("ZRANGE", K_DELAY, 0, 0, "WITHSCORES")
local out = { head[2] and tonumber(head[2]) or -1, (#due == limit) and 1 or 0, #trans / 6 }
for i = 1, #trans do out[#out + 1] = trans[i] end
if bad > 0 then out[#out + 1] = bad end
return out
