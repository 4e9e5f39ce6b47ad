-- reserve.lua — deliver up to `count` ready jobs from these topics (earlier topics first),
-- all on one shard. A job with ttr > 0 is leased until now + ttr (its entry in the delay zset);
-- a job with ttr = 0 is delivered at most once: it is removed as it is handed out.
-- KEYS[1] = <prefix>:{<shard>}:jobs
-- ARGV    = now, count, who, topic1, topic2, ...
-- Returns a list of jobs, each {idkey, topic, body, priority, ttr, tries, attempt, runAt,
--          bizKey, leaseUntil (0 when ttr = 0), ver, to_state}
local now = tonumber(ARGV[1])
local want, who = tonumber(ARGV[2]), ARGV[3]
local out = {}
local lease_added = nil
for t = 4, #ARGV do
    if #out >= want then break end
    local topic = ARGV[t]
    local popped = redis.call("ZPOPMIN", ready_key(topic), want - #out)
    for p = 1, #popped, 2 do
        local idkey = popped[p]
        local j = load_job(idkey)
        if j and j.st == READY then
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
            out[#out + 1] = { idkey, topic, j.body, j.prio, j.ttr, j.tries, j.att, j.runat, j.biz,
                              lease, j.ver, j.st }
        end
    end
end
if lease_added then wake_if_head(lease_added[1]) end
return out
