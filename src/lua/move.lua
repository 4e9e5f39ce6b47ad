-- move.lua — the mover's step on one shard: make due jobs ready and expire leases.
-- KEYS[1] = <prefix>:{<shard>}:jobs
-- ARGV    = now, limit, who
-- A due entry of the delay zset is either a delayed job (-> ready) or a reserved job whose
-- lease ran out (-> ready for another delivery, or delayed by its backoff (lib.lua
-- backoff_delay), or dead when it had its `tries` deliveries).
-- Each record is checked before its entry leaves the zset: a missing or corrupt one is set
-- aside (lib.lua set_aside) and counted, and the rest of the batch is still moved.
-- Returns {next_due or -1, more (0/1), n, then n transitions of 6:
--          idkey, from_state, to_state, ver, attempts, runAt,
--          then, only when records were set aside, their number}
local now = tonumber(ARGV[1])
local limit, who = tonumber(ARGV[2]), ARGV[3]
local due = redis.call("ZRANGEBYSCORE", K_DELAY, "-inf", now, "LIMIT", 0, limit)
local trans = {}
local bad = 0
for _, idkey in ipairs(due) do
    local j, why, rec = check_job(idkey)
    redis.call("ZREM", K_DELAY, idkey)
    if not j then
        bad = bad + 1
        set_aside(idkey, why, rec)
    elseif j.st == DELAYED or j.st == RESERVED then
        local from = j.st
        count(from, j.topic, -1)
        if from == RESERVED and j.att >= j.tries then
            j.st = DEAD
            redis.call("ZADD", dead_key(j.topic), now, idkey)
            biz_release(idkey, j)
            count(DEAD, j.topic, 1)
        else
            -- a redelivery waits out its topic's backoff (or the job's own), or is due now; a
            -- delayed job keeps its own due time for ordering
            local pause = (from == RESERVED) and backoff_delay(j, topic_conf(j.topic)) or 0
            if pause > 0 then
                j.st = DELAYED
                j.runat = now + pause
                redis.call("ZADD", K_DELAY, j.runat, idkey)
                count(DELAYED, j.topic, 1)
            else
                local at = (from == RESERVED) and now or j.runat
                j.st = READY
                redis.call("ZADD", ready_key(j.topic), ready_score(j.prio, at), idkey)
                count(READY, j.topic, 1)
                notify_ready(j.topic)
            end
        end
        j.ver = j.ver + 1
        save_job(idkey, j)
        log_transition(idkey, from, j.st, j, now, "delay", who)
        local t = #trans
        trans[t + 1], trans[t + 2], trans[t + 3] = idkey, from, j.st
        trans[t + 4], trans[t + 5], trans[t + 6] = j.ver, j.att, j.runat
    end
end
publish_ready()
local head = redis.call("ZRANGE", K_DELAY, 0, 0, "WITHSCORES")
local out = { head[2] and tonumber(head[2]) or -1, (#due == limit) and 1 or 0, #trans / 6 }
for i = 1, #trans do out[#out + 1] = trans[i] end
if bad > 0 then out[#out + 1] = bad end
return out
