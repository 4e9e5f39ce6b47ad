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
-- KEYS[1] = <prefix>:{<shard>}:jobs
-- ARGV    = now, count, who, lease (0 = each job's ttr; a delivery route leases for its own
--           timeout), topic1, topic2, ...
-- Returns {wait, bad, job...}: wait = 0, or when a rate held back ready jobs (whether or not
--          some were delivered), the ms until that topic's next token; bad = records set aside; each job
--          {idkey, topic, body, priority, ttr, tries, attempt, runAt, bizKey, leaseUntil
--          (0 when ttr = 0), ver, to_state[, traceparent, tracestate (false: none)]} — the
--          last two only for a job with a trace context (lib.lua reply_trace).
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
for t = 5, #ARGV do
    local topic = ARGV[t]
    local rkey = ready_key(topic)
    local conf = t == 5 and topic_conf_of(first[2]) or topic_conf(topic)
    local limit = want -- jobs this call may still deliver, over all its topics
    local bucket = nil
    if conf.paused then
        limit = got()
    elseif conf.rate > 0 then
        bucket = take_tokens(topic, conf.rate, now)
        limit = math.min(want, got() + math.floor(bucket.tok))
    end
    local delivered, again, late = 0, 0, 0 -- for the token bucket, and lib.lua's tally
    while got() < limit and budget > 0 do
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
                taken[idkey] = true
                count_later(READY, topic, -1)
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
                    save_later(idkey, pack_job(j))
                    if not lease_added or lease < lease_added[2] then lease_added = { idkey, lease } end
                end
                log_transition(idkey, READY, j.st, j, now, "ready", who)
                delivered = delivered + 1
                if j.att > 1 then
                    again = again + 1
                elseif now > j.runat then
                    late = late + (now - j.runat)
                end
                out[#out + 1] = reply_trace({ idkey, topic, j.body, j.prio, j.ttr, j.tries, j.att, j.runat,
                                              j.biz, lease, j.ver, j.st }, j)
            end
            -- an entry whose job is in another state is stale: dropped, as ZPOPMIN did
        end
        -- every entry looked at leaves (at most 1000 a round: within unpack's limit), so the
        -- loop always progresses
        redis.call("ZREM", rkey, unpack(ids))
    end
    if bucket then
        -- the rate stopped this topic with ready jobs left: say when its next token comes
        if limit < want and got() == limit and redis.call("EXISTS", rkey) == 1 then
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
