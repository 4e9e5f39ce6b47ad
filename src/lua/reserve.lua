-- reserve.lua — deliver up to `count` ready jobs from these topics (earlier topics first),
-- all on one shard. A job with ttr > 0 is leased until now + ttr (its entry in the delay zset);
-- a job with ttr = 0 is delivered at most once: it is removed as it is handed out.
-- Each entry is looked at before it is taken off its ready zset, so a record that is missing
-- or does not decode costs only its own entry (set aside, see lib.lua set_aside) and the
-- good jobs behind it are still delivered.
-- KEYS[1] = <prefix>:{<shard>}:jobs
-- ARGV    = now, count, who, topic1, topic2, ...
-- Returns a list of jobs, each {idkey, topic, body, priority, ttr, tries, attempt, runAt,
--          bizKey, leaseUntil (0 when ttr = 0), ver, to_state}; when records were set aside,
--          one more element after the jobs: their number (an integer).
local now = tonumber(ARGV[1])
local want, who = tonumber(ARGV[2]), ARGV[3]
local out = {}
local bad = 0
local lease_added = nil
local budget = want + 1000 -- entries looked at per call, bad ones included: bounded work
for t = 4, #ARGV do
    local topic = ARGV[t]
    local rkey = ready_key(topic)
    local delivered, again, late = 0, 0, 0 -- for lib.lua's tally
    while #out < want and budget > 0 do
        local ids = redis.call("ZRANGE", rkey, 0, math.min(want - #out, budget, 1000) - 1)
        if #ids == 0 then break end
        for _, idkey in ipairs(ids) do
            budget = budget - 1
            local j, why, rec = check_job(idkey)
            if not j then
                bad = bad + 1
                set_aside(idkey, why, rec)
            elseif j.st == READY then
                count(READY, topic, -1)
                j.att = j.att + 1
                j.ver = j.ver + 1
                local lease = 0
                if j.ttr == 0 then
                    j.st = FINISHED
                    redis.call("HDEL", K_JOBS, idkey)
                    biz_release(idkey, j)
                    tombstone(idkey, now)
                else
                    j.st = RESERVED
                    lease = now + j.ttr
                    redis.call("ZADD", K_DELAY, lease, idkey)
                    count(RESERVED, topic, 1)
                    save_job(idkey, j)
                    if not lease_added or lease < lease_added[2] then lease_added = { idkey, lease } end
                end
                log_transition(idkey, READY, j.st, j, now, "ready", who)
                delivered = delivered + 1
                if j.att > 1 then
                    again = again + 1
                elseif now > j.runat then
                    late = late + (now - j.runat)
                end
                out[#out + 1] = { idkey, topic, j.body, j.prio, j.ttr, j.tries, j.att, j.runat, j.biz,
                                  lease, j.ver, j.st }
            end
            -- an entry whose job is in another state is stale: dropped, as ZPOPMIN did
        end
        -- every entry looked at leaves (at most 1000 a round: within unpack's limit), so the
        -- loop always progresses
        redis.call("ZREM", rkey, unpack(ids))
    end
    if delivered > 0 then tally(topic, "delivered", delivered) end
    if again > 0 then tally(topic, "redelivered", again) end
    if late > 0 then tally(topic, "late", late) end
    if #out >= want or budget <= 0 then break end
end
if lease_added then wake_if_head(lease_added[1]) end
if bad > 0 then out[#out + 1] = bad end
return out
