-- topicjobs.lua — a page of one topic's jobs in one state, in the order that state keeps
-- them (no change): delayed (next due first) and reserved (lease ending first) from the
-- shard's delay zset, which they share with each other and with every topic of the shard;
-- ready (next to be delivered first) and dead (oldest death first) from the topic's zsets.
-- The work of a call is bounded by `scan`, the index entries it looks at, not by what it
-- finds: on a shard whose delay zset holds a million jobs of other topics a page may come
-- back short (even empty) with a next position, and the caller goes on from there.
-- KEYS[1] = <prefix>:{<shard>}:jobs   (the topic's shard)
-- ARGV    = topic, state (1 delayed | 2 ready | 3 reserved | 6 dead),
--           after_score, after_idkey (start after this entry; '' '' = from the first),
--           limit (jobs at most), scan (entries looked at, at most)
-- Returns {next_score, next_idkey ('' '' when nothing is left), scanned,
--          {{idkey, score, attempts, priority, ttr, tries, runAt, bizKey, body[, traceparent,
--            tracestate (false: none)]}, ...}} (lib.lua reply_trace)
--   score: due ms (delayed), lease deadline (reserved), time of death (dead),
--          priority * 1e13 + due ms (ready); the next position is the last entry looked at.
local topic, want = ARGV[1], tonumber(ARGV[2])
local after_score, after_idkey = ARGV[3], ARGV[4]
local limit, scan = tonumber(ARGV[5]), tonumber(ARGV[6])

local key = K_DELAY
if want == READY then key = ready_key(topic) elseif want == DEAD then key = dead_key(topic) end

local rank = rank_after(key, after_score, after_idkey)

local total = redis.call("ZCARD", key)
local out, scanned = {}, 0
local last_score, last_idkey = "", ""
while #out < limit and scanned < scan and rank < total do
    local entries = redis.call("ZRANGE", key, rank, rank + math.min(scan - scanned, 200) - 1, "WITHSCORES")
    if #entries == 0 then break end
    for i = 1, #entries, 2 do
        local idkey, score = entries[i], entries[i + 1]
        scanned, rank = scanned + 1, rank + 1
        last_score, last_idkey = score, idkey
        local rec = redis.call("HGET", K_JOBS, idkey)
        -- the first fields decide; the body is decoded only for the jobs listed
        local ok, _, _, st, _, _, _, _, _, t = false
        if rec then ok, _, _, st, _, _, _, _, _, t = pcall(cmsgpack.unpack_limit, rec, 8) end
        if ok and st == want and t == topic then
            local ok2, _, _, att, prio, ttr, tries, runat, _, biz, body, _, tp, ts, grp = pcall(cmsgpack.unpack, rec)
            if ok2 then
                out[#out + 1] = reply_trace({ idkey, score, att, prio, ttr, tries, runat, biz, body },
                                            { tp = tp, ts = ts, grp = grp })
                if #out >= limit then break end
            end
        end
    end
end
if rank >= total then last_score, last_idkey = "", "" end
return { last_score, last_idkey, scanned, out }
