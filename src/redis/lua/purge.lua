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
local topic, want = ARGV[1], tonumber(ARGV[2])
local after_score, after_idkey = ARGV[3], ARGV[4]
local limit, scan, max_idkey = tonumber(ARGV[5]), tonumber(ARGV[6]), ARGV[7]
local now, who = tonumber(ARGV[8]), ARGV[9]

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
if reached_end then last_score, last_idkey = "", "" end
return { last_score, last_idkey, deleted }
