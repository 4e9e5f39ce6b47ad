-- deadexpire.lua — dead jobs leave Redis after the same lifetime their MySQL rows have
-- (retention removes a dead message [mysql] retention_days after it died), a bounded step at
-- a time. The dead topics are found in the counters hash (fields "dead:<topic>") with HSCAN,
-- so no other structure is kept and data written before this script existed is covered too.
-- KEYS[1] = <prefix>:{<shard>}:jobs
-- ARGV    = cursor (HSCAN's; "0" to start), cutoff (unix ms: dead before it go), limit (jobs
--           removed at most by this call)
-- Returns {next cursor ("0" when the pass is done), removed}
-- Not logged in the outbox: the message row stays 'dead' and retention deletes it.
local cursor, cutoff, limit = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local removed = 0
local scan = redis.call("HSCAN", K_COUNT, cursor, "MATCH", "dead:*", "COUNT", 200)
for i = 1, #scan[2], 2 do
    local topic = string.sub(scan[2][i], 6)
    local key = dead_key(topic)
    local ids = redis.call("ZRANGEBYSCORE", key, "-inf", "(" .. cutoff, "LIMIT", 0, limit - removed)
    for _, idkey in ipairs(ids) do
        local j = load_job(idkey)
        redis.call("ZREM", key, idkey)
        if j and j.st == DEAD then
            redis.call("HDEL", K_JOBS, idkey)
            biz_release(idkey, j)
            count(DEAD, topic, -1)
        elseif not j then
            count(DEAD, topic, -1) -- an entry without its record: the counter counted it
        end
        removed = removed + 1
    end
    if removed >= limit then
        return { cursor, removed } -- not done with this page: scan it again next call
    end
end
return { scan[1], removed }
