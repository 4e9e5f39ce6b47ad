-- reserve.lua — deliver up to `count` ready jobs from these topics (earlier topics first),
-- all on one shard. A job with ttr > 0 is leased until now + ttr (its entry in the delay zset);
-- a job with ttr = 0 is delivered at most once: it is removed as it is handed out.
-- Each entry is looked at before it is taken off its ready zset, so a record that is missing
-- or does not decode costs only its own entry (set aside, see lib.lua set_aside) and the
-- good jobs behind it are still delivered. Records, lease entries and counters are written
-- once at the end (lib.lua gathered()).
-- A fenced shard (mark.lua: Redis rolled back) delivers nothing: {0, 0}.
-- A paused topic delivers nothing (its jobs stay ready, in order). A topic with a rate takes
-- tokens from its bucket (lib.lua take_tokens) — one bucket per topic in Redis, so the rate
-- holds for the whole fleet — and delivers no more than it got.
-- A topic with group settings (lib.lua "Flow control by key") delivers one job at a time from
-- whichever comes first of its ready zset's head (its ungrouped jobs) and the head of the group
-- whose turn it is, by ready score: groups take turns (round robin), and ungrouped jobs keep
-- their place in time among them. A grouped job found on its ready zset (made ready before the
-- topic had group settings) moves to its group's range instead of being delivered.
-- KEYS[1] = <prefix>:{<shard>}:jobs
-- ARGV    = now, count, who, lease (0 = each job's ttr; a delivery route leases for its own
--           timeout), topic1, topic2, ...
-- Returns {wait, bad, job...}: wait = 0, or when a rate held back ready jobs (whether or not
--          some were delivered), the ms until that topic's next token; bad = records set aside; each job
--          {idkey, topic, body, priority, ttr, tries, attempt, runAt, bizKey, leaseUntil
--          (0 when ttr = 0), ver, to_state[, traceparent, tracestate (false: none)[, group]]} —
--          the last three only for a job with a trace context or a group (lib.lua reply_trace).
local now = tonumber(ARGV[1])
local want, who, lease_ms = tonumber(ARGV[2]), ARGV[3], tonumber(ARGV[4])
local out = { 0, 0 }
-- a rolled-back shard delivers nothing until its fence check has run (mark.lua); the fence is
-- read with the first topic's settings, in one command
local first = redis.call("HMGET", base .. "topic", K_FENCE_FIELD, ARGV[5])
if first[1] then return out end
local HEAD = 2 -- wait, bad
local bad, wait = 0, 0
local lease_added = nil
local taken = {} -- id keys delivered by this call
local budget = want + 1000 -- entries looked at per call, bad ones included: bounded work
local function got() return #out - HEAD end

-- Deliver job j (checked, ready), taken off its ready structure by the caller.
local function deliver(idkey, j, topic, from_group)
    taken[idkey] = true
    j.att = j.att + 1
    j.ver = j.ver + 1
    local lease = 0
    if j.ttr == 0 then
        j.st = FINISHED
        drop_later(idkey)
        biz_release(idkey, j)
        tombstone(idkey, now)
    else
        j.st = RESERVED
        lease = now + (lease_ms > 0 and lease_ms or j.ttr)
        delay_later(idkey, lease)
        count_later(RESERVED, topic, 1)
        if from_group then j.hold = 1 end -- a slot of its group is its own until it ends
        save_later(idkey, pack_job(j))
        if not lease_added or lease < lease_added[2] then lease_added = { idkey, lease } end
    end
    log_transition(idkey, READY, j.st, j, now, "ready", who)
    out[#out + 1] = reply_trace({ idkey, topic, j.body, j.prio, j.ttr, j.tries, j.att, j.runat,
                                  j.biz, lease, j.ver, j.st }, j)
end

-- A topic with group settings: up to `limit` jobs, one at a time. Returns delivered, again, late
-- and the ms until a group held by groupRate may deliver (0: none is).
-- Made only by a call that may meet such a topic (its first topic has group settings, or it
-- has several): a closure over this many locals costs ~0.5 us of Redis CPU to make, which every
-- reserve of an ungrouped topic would otherwise pay (lib.lua GL says why).
local first_conf = topic_conf_of(first[2])
local reserve_grouped = nil
if #ARGV > 5 or first_conf.groups or first_conf.drain then
    reserve_grouped = function(topic, conf, limit)
        local rkey, gr, q = ready_key(topic), GL.gready_key(topic), GL.gq_key(topic)
        local delivered, again, late = 0, 0, 0
        if conf.grate > 0 then
            -- the sweeps, a bounded step a call: groups held by their rate come back to the round
            -- once due (the head first: lib.lua says why it comes due first), and groups with
            -- nothing left drop their field once their tat has passed; an entry that no longer
            -- holds (the group left the list meanwhile) just goes
            local burst = GL.g_burst(conf)
            local gt, gz = GL.gt_key(topic), GL.gz_key(topic)
            for _ = 1, 100 do
                local g = redis.call("LINDEX", gt, 0)
                if not g then break end
                local s = GL.gs_get(topic, g)
                local held = GL.g_on(s, GL.G_HELD)
                if held and s[6] - burst > now then break end
                redis.call("LPOP", gt)
                if held then
                    GL.g_unlist(s, GL.G_HELD)
                    GL.g_wake_or_put(topic, g, conf, s, now)
                end
            end
            for _ = 1, 100 do
                local g = redis.call("LINDEX", gz, 0)
                if not g then break end
                local s = GL.gs_get(topic, g)
                local idle = GL.g_on(s, GL.G_IDLE)
                if idle and s[6] > now and s[1] + s[2] + s[3] + s[4] == 0 then break end
                redis.call("LPOP", gz)
                if idle then
                    GL.g_unlist(s, GL.G_IDLE)
                    GL.gs_put(topic, g, s, now)
                end
            end
        end
        local plain_left = true -- the ready zset had entries when last looked at (nothing adds to it here)
        while got() < limit and budget > 0 do
            budget = budget - 1
            local g = redis.call("LINDEX", q, 0)
            local from_round = g ~= nil
            if not g and conf.drain then
                -- settings gone: a group left out of the round (it was at its limit, or waited for
                -- its rate) is served too, the first range at a time
                local m = redis.call("ZRANGE", gr, 0, 0)[1]
                g = m and string.match(m, "^(.-)%z")
            end
            local member = g and redis.call("ZRANGEBYLEX", gr, "[" .. g .. "\0", "(" .. g .. "\1", "LIMIT", 0, 1)[1]
            local plain = plain_left and redis.call("ZRANGE", rkey, 0, 0, "WITHSCORES") or {}
            plain_left = plain[1] ~= nil
            local gord = member and tonumber(string.sub(member, #g + 2, #g + 15))
            if g and not member then
                -- the round's head has no ready job any more (its jobs were deleted, moved, drained):
                -- it leaves the round, and its field follows
                redis.call("LPOP", q)
                local s = GL.gs_get(topic, g)
                GL.g_unlist(s, GL.G_ROUND)
                GL.gs_put(topic, g, s, now)
            elseif plain[1] and (not gord or tonumber(plain[2]) <= gord) then
                local idkey = plain[1]
                redis.call("ZREM", rkey, idkey)
                local j, why, rec = nil, nil, nil
                if not taken[idkey] then j, why, rec = check_job(idkey) end
                if taken[idkey] then
                    -- stale, as in the ungrouped loop
                elseif not j then
                    bad = bad + 1
                    set_aside(idkey, why, rec)
                elseif j.st == READY and j.grp and conf.groups then
                    -- made ready before the topic had group settings: to its group's range (counted
                    -- by the range from now on, no longer in its group's field)
                    local s = GL.gs_get(topic, j.grp)
                    s[4] = s[4] - 1
                    j.ord = tonumber(plain[2])
                    redis.call("ZADD", gr, 0, GL.gmember(j.grp, j.ord, idkey))
                    save_job(idkey, j)
                    GL.g_wake_or_put(topic, j.grp, conf, s, now)
                elseif j.st == READY then
                    count_later(READY, topic, -1)
                    deliver(idkey, j, topic, false)
                    delivered = delivered + 1
                    if j.att > 1 then again = again + 1 elseif now > j.runat then late = late + (now - j.runat) end
                end
            elseif member then
                local idkey = string.sub(member, #g + 16)
                redis.call("ZREM", gr, member)
                local j, why, rec = check_job(idkey)
                if not j then
                    bad = bad + 1
                    set_aside(idkey, why, rec)
                elseif j.st == READY and not taken[idkey] and j.grp == g then
                    count_later(READY, topic, -1)
                    deliver(idkey, j, topic, true)
                    delivered = delivered + 1
                    if j.att > 1 then again = again + 1 elseif now > j.runat then late = late + (now - j.runat) end
                    local s = GL.gs_get(topic, g)
                    if j.st == RESERVED then s[2], s[1] = s[2] + 1, s[1] + 1 end
                    if conf.grate > 0 then s[6] = math.max(s[6], now) + GL.g_interval(conf) end
                    if from_round then
                        -- to the back of the round, if it may deliver again (else out of it, or
                        -- held by its rate)
                        redis.call("LPOP", q)
                        GL.g_unlist(s, GL.G_ROUND)
                    end
                    GL.g_wake_or_put(topic, g, conf, s, now, true)
                end
            else
                break
            end
        end
        if conf.drain and redis.call("EXISTS", gr) == 0 then
            -- the grouped ready jobs left when the settings went are all out: an ordinary topic again
            local v = redis.call("HGET", base .. "topic", topic)
            if v then redis.call("HSET", base .. "topic", topic, (string.gsub(v, " g0 0 0 ", " ", 1))) end
            GL.g_relist(topic, false)
        end
        local held_back = 0
        if conf.grate > 0 and got() < limit then
            local g = redis.call("LINDEX", GL.gt_key(topic), 0)
            if g then
                local s = GL.gs_get(topic, g)
                held_back = math.max(1, math.ceil(GL.g_on(s, GL.G_HELD) and s[6] - GL.g_burst(conf) - now or 1))
            end
        end
        return delivered, again, late, held_back
    end
end

for t = 5, #ARGV do
    local topic = ARGV[t]
    local rkey = ready_key(topic)
    local conf = t == 5 and first_conf or topic_conf(topic)
    local limit = want -- jobs this call may still deliver, over all its topics
    local bucket = nil
    if conf.paused then
        limit = got()
    elseif conf.rate > 0 then
        bucket = take_tokens(topic, conf.rate, now)
        limit = math.min(want, got() + math.floor(bucket.tok))
    end
    local delivered, again, late = 0, 0, 0 -- for the token bucket, and lib.lua's tally
    if (conf.groups or conf.drain) and got() < limit then
        local gwait
        delivered, again, late, gwait = reserve_grouped(topic, conf, limit)
        if gwait > 0 and (wait == 0 or gwait < wait) then wait = gwait end
    end
    while not (conf.groups or conf.drain) and got() < limit and budget > 0 do
        local ids = redis.call("ZRANGE", rkey, 0, math.min(limit - got(), budget, 1000) - 1)
        if #ids == 0 then break end
        for _, idkey in ipairs(ids) do
            budget = budget - 1
            local j, why, rec
            if not taken[idkey] then j, why, rec = check_job(idkey) end
            if taken[idkey] then
                -- a stale entry of a job this call delivered already (its new record is
                -- written at the end, so it still reads as ready): dropped, as any stale one
            elseif not j then
                bad = bad + 1
                set_aside(idkey, why, rec)
            elseif j.st == READY then
                count_later(READY, topic, -1)
                if j.grp then
                    -- a grouped job of a topic without group settings: counted in its group
                    GL.g_change(j, READY, j.ttr == 0 and nil or RESERVED, 0, nil)
                end
                deliver(idkey, j, topic, false)
                delivered = delivered + 1
                if j.att > 1 then
                    again = again + 1
                elseif now > j.runat then
                    late = late + (now - j.runat)
                end
            end
            -- an entry whose job is in another state is stale: dropped, as ZPOPMIN did
        end
        -- every entry looked at leaves (at most 1000 a round: within unpack's limit), so the
        -- loop always progresses
        redis.call("ZREM", rkey, unpack(ids))
    end
    if bucket then
        -- the rate stopped this topic with ready jobs left: say when its next token comes
        if limit < want and got() == limit and redis.call("EXISTS", rkey, GL.gq_key(topic)) > 0 then
            local w = math.ceil((1 - (bucket.tok - delivered)) * 1000 / conf.rate)
            if wait == 0 or w < wait then wait = math.max(w, 1) end
        end
        spend_tokens(bucket, delivered)
    end
    if delivered > 0 then tally(topic, "delivered", delivered) end
    if again > 0 then tally(topic, "redelivered", again) end
    if late > 0 then tally(topic, "late", late) end
    if got() >= want or budget <= 0 then break end
end
write_gathered()
if lease_added then wake_if_head(lease_added[1]) end
out[1], out[2] = wait, bad
return out
