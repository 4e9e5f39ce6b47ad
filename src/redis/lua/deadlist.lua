-- deadlist.lua — list a topic's dead jobs, oldest death first.
-- flags: no-writes  (it only reads: it still runs while Redis is full)
-- KEYS[1] = <prefix>:{<shard>}:jobs   (the topic's shard)
-- ARGV    = topic, limit
-- Returns a list of {idkey, diedAt, attempts, priority, ttr, tries, runAt, bizKey, body[,
--                   traceparent, tracestate (false: none)]} (lib.lua reply_trace)
local topic, limit = ARGV[1], tonumber(ARGV[2])
local ids = redis.call("ZRANGE", dead_key(topic), 0, limit - 1, "WITHSCORES")
local out = {}
for p = 1, #ids, 2 do
    local j = load_job(ids[p])
    if j then
        out[#out + 1] = reply_trace({ ids[p], tonumber(ids[p + 1]), j.att, j.prio, j.ttr, j.tries, j.runat, j.biz,
                                      j.body }, j)
    end
end
return out
