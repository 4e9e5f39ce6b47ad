-- topicjobs.lua — a page of one topic's jobs in one state, in the order that state keeps
-- flags: no-writes  (it only reads: it still runs while Redis is full)
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
-- Returns {next_score, next_idkey ('' '' when nothing is left; a grouped topic's ready jobs of
--          groups are listed after its other ready ones: grouped_page below), scanned,
--          {{idkey, score, attempts, priority, ttr, tries, runAt, bizKey, body[, traceparent,
--            tracestate (false: none)]}, ...}} (lib.lua reply_trace)
--   score: due ms (delayed), lease deadline (reserved), time of death (dead),
--          priority * 1e13 + due ms (ready); the next position is the last entry looked at.
local topic, want = ARGV[1], tonumber(ARGV[2])
local after_score, after_idkey = ARGV[3], ARGV[4]
local limit, scan = tonumber(ARGV[5]), tonumber(ARGV[6])

-- A grouped topic's ready jobs of groups (lib.lua "Flow control by key") come after its ready
-- zset's, from their own zset ("gr:"), in its order (by group, then as the ready zset would
-- keep them). Their positions are scored GR_BASE + rank, beyond every ready score, with the id
-- key of the last job looked at: the walk resumes after that job's member when its record still
-- says where it is, else at the rank.
local GR_BASE = 1000000000000000
local function grouped_page(after_rank, after)
    local gr = GL.gready_key(topic)
    local rank = after_rank
    local j = after ~= "" and load_job(after)
    if j and j.grp and j.ord then
        rank = redis.call("ZLEXCOUNT", gr, "-", "[" .. GL.gmember(j.grp, j.ord, after))
    end
    local total = redis.call("ZCARD", gr)
    local out, scanned, last = {}, 0, ""
    while #out < limit and scanned < scan and rank < total do
        local members = redis.call("ZRANGE", gr, rank, rank + math.min(scan - scanned, 200) - 1)
        if #members == 0 then break end
        for _, m in ipairs(members) do
            scanned, rank = scanned + 1, rank + 1
            local idkey = string.sub(m, string.find(m, "\0", 1, true) + 15)
            last = idkey
            local g = load_job(idkey)
            if g and g.st == READY and g.topic == topic then
                out[#out + 1] = reply_trace({ idkey, g.ord or 0, g.att, g.prio, g.ttr, g.tries, g.runat, g.biz, g.body }, g)
                if #out >= limit then break end
            end
        end
    end
    if rank >= total then return { "", "", scanned, out } end
    return { string.format("%d", GR_BASE + rank), last, scanned, out }
end
if want == READY and after_score ~= "" and tonumber(after_score) >= GR_BASE then
    return grouped_page(tonumber(after_score) - GR_BASE, after_idkey)
end

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
if rank >= total then
    local walked = last_idkey -- a valid position's id key, for the groups' first page
    last_score, last_idkey = "", ""
    if want == READY and redis.call("EXISTS", GL.gready_key(topic)) == 1 then
        if #out < limit and scanned < scan then
            -- room left: go on with the groups' ranges in this same call
            local more = grouped_page(0, "")
            for _, e in ipairs(more[4]) do out[#out + 1] = e end
            more[3], more[4] = scanned + more[3], out
            return more
        end
        last_score, last_idkey = string.format("%d", GR_BASE), walked
    end
end
return { last_score, last_idkey, scanned, out }
