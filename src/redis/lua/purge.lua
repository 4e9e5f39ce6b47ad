-- purge.lua — one batch of POST /topics/{topic}/purge: delete a topic's jobs in one state,
-- walking that state's index from a position, each job as delete.lua deletes it (delete_job:
-- out of its index and the jobs hash, counters, bizKey released, tombstone while a restore or
-- a pager needs one, the `deleted` transition in the outbox). A batch is bounded twice — jobs
-- deleted (`limit`) and index entries looked at (`scan`) — so it holds Redis for a few
-- milliseconds however big the topic, or the shard's delay zset (shared by every topic of the
-- shard, and by reserved jobs, which a purge never touches).
-- KEYS[1] = <prefix>:{<shard>}:jobs   (the topic's shard)
-- ARGV    = topic, state (1 delayed | 2 ready | 6 dead),
--           after_score, after_idkey (start after this entry; '' '' = from the first),
--           limit, scan, max_idkey (jobs with a greater id key, pushed after the purge began,
--           are left), now, who
-- Returns {next_score, next_idkey ('' '' when the index was walked to its end), deleted}
-- (positions are opaque to the caller: it hands back what it was given)
local topic, want = ARGV[1], tonumber(ARGV[2])
local after_score, after_idkey = ARGV[3], ARGV[4]
local limit, scan, max_idkey = tonumber(ARGV[5]), tonumber(ARGV[6]), ARGV[7]
local now, who = tonumber(ARGV[8]), ARGV[9]

-- A grouped topic's ready jobs of groups are on their own zset (lib.lua "Flow control by key"),
-- walked after the ready zset: its positions are "g<rank>" (entries looked at and left), as its
-- members (the group's name in each) do not fit a position.
if want == READY and string.sub(after_score, 1, 1) == "g" then
    local gr = GL.gready_key(topic)
    local rank = tonumber(string.sub(after_score, 2)) or 0
    local deleted, scanned, reached_end = 0, 0, false
    while deleted < limit and scanned < scan do
        local members = redis.call("ZRANGE", gr, rank, rank + math.min(scan - scanned, 200) - 1)
        if #members == 0 then
            reached_end = true
            break
        end
        for _, m in ipairs(members) do
            scanned = scanned + 1
            local idkey = string.sub(m, string.find(m, "\0", 1, true) + 15)
            local j = load_job(idkey)
            if j and j.st == READY and j.topic == topic and not bytes_after(idkey, max_idkey) then
                delete_job(idkey, j, now, who) -- its member leaves: the next one takes its rank
                deleted = deleted + 1
            else
                rank = rank + 1
            end
            if deleted >= limit or scanned >= scan then break end
        end
    end
    if reached_end then
        -- the round's groups whose ready jobs this purge took are left to look at
        local left = redis.call("LLEN", GL.gq_key(topic))
        if left == 0 then return { "", "", deleted } end
        return { "c" .. left, "c", deleted }
    end
    return { "g" .. rank, "g", deleted }
end

-- Then the round, once over, `scan` entries a batch ("c<entries left>"): a group whose ready
-- jobs went leaves it, as reserve would drop it when the round reached it (lib.lua), so that a
-- purged topic keeps nothing of its groups even with no consumer to reach them; one with ready
-- jobs pushed since goes back at the tail.
if want == READY and string.sub(after_score, 1, 1) == "c" then
    local q = GL.gq_key(topic)
    local left = tonumber(string.sub(after_score, 2)) or 0
    local conf = GL.gconf(topic)
    for _ = 1, math.min(left, scan) do
        local g = redis.call("LPOP", q)
        if not g then
            left = 0
            break
        end
        left = left - 1
        local s = GL.gs_get(topic, g)
        GL.g_unlist(s, GL.G_ROUND)
        GL.g_wake_or_put(topic, g, conf, s, now, true)
    end
    if left <= 0 then return { "", "", 0 } end
    return { "c" .. left, "c", 0 }
end

local key = K_DELAY
if want == READY then key = ready_key(topic) elseif want == DEAD then key = dead_key(topic) end

local rank = rank_after(key, after_score, after_idkey)

local deleted, scanned, reached_end = 0, 0, false
local last_score, last_idkey = after_score, after_idkey
while deleted < limit and scanned < scan do
    local entries = redis.call("ZRANGE", key, rank, rank + math.min(scan - scanned, 200) - 1, "WITHSCORES")
    if #entries == 0 then
        reached_end = true
        break
    end
    for i = 1, #entries, 2 do
        local idkey, score = entries[i], entries[i + 1]
        scanned = scanned + 1
        last_score, last_idkey = score, idkey
        local rec = redis.call("HGET", K_JOBS, idkey)
        -- the first fields decide; a record of another topic is never decoded whole
        local ok, _, st, t = false
        -- unpack_limit answers the next offset first, then ver, state, ... topic (8th)
        if rec then ok, _, _, st, _, _, _, _, _, t = pcall(cmsgpack.unpack_limit, rec, 8) end
        if ok and st == want and t == topic and not bytes_after(idkey, max_idkey) then
            delete_job(idkey, load_job(idkey), now, who) -- its entry leaves: the next one takes its rank
            deleted = deleted + 1
        else
            rank = rank + 1
        end
        if deleted >= limit or scanned >= scan then break end
    end
end
if reached_end then
    last_score, last_idkey = "", ""
    if want == READY and redis.call("EXISTS", GL.gready_key(topic)) == 1 then last_score, last_idkey = "g0", "g" end
end
return { last_score, last_idkey, deleted }
