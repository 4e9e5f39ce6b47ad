-- lib.lua — prelude prepended to every script (scripts/embed-lua.sh).
--
-- Every script runs on ONE shard: KEYS[1] is "<prefix>:{<shard>}:jobs" and every other key
-- it touches shares the "{<shard>}" hash tag, so the layout is Redis Cluster ready. The tag is
-- the shard number ("3") with [redis] cluster = false, or "<n>.<k>" ("3.2520") with true: a
-- tag that puts the shard's slot where it spreads the shards over the masters (src/core/shardtag.h).
-- Either way the shard number is what comes before the '.', and keys are made from KEYS[1]'s
-- own base, so a script never touches another tag.
--
-- Keys of a shard (base = "<prefix>:{<shard>}:"):
--   base.."jobs"          hash   id key -> job record (below)
--   base.."delay"         zset   delayed jobs scored by due ms, reserved jobs by lease deadline
--   base.."ready:"..topic zset   ready jobs scored by priority * 1e13 + due ms (lowest first)
--   base.."dead:"..topic  zset   dead jobs scored by the time they died
--   base.."biz:"..topic   hash   bizKey -> id key of the live job holding it ("<id key>@<runAt>"
--                                for a far job, which MySQL alone holds: biz_holder below)
--   base.."count"         hash   "<state>:<topic>" -> number of jobs (O(1) stats)
--   base.."restoring"     string present while a restore runs (finish/delete leave tombstones)
--   base.."gone"          zset   tombstones: id keys finished/deleted during a restore or while
--                                paging, and far jobs deleted (scored by time; pager.c prunes)
--   base.."paging"        set of the pager's page steps between their Redis write and their
--                         MySQL commit (pager.c; expires by itself after a crash)
--   base.."log"           stream the journal outbox: one entry per transition (below)
--   base.."bad"           hash   id key -> a job record that did not decode, set aside by move/reserve
--   base.."marks"         hash   instance -> its loss-detection mark (mark.lua); "restored" -> when a
--                                restore last completed
--   base.."topic"         hash   topic -> its settings as the scripts need them (topic_conf below);
--                                also "~synced" (topicset.lua) and "~fenced" (mark.lua),
--                                written from MySQL (topicset.lua); "~synced" -> the settings
--                                sequence this shard holds every change up to
--   base.."bucket:"..topic hash  the topic's rate token bucket (take_tokens below)
--   base.."tally"         hash   "<what>:<topic>" -> a running total for the console's rates (below)
-- Channels: "<prefix>:ready" (payload: topic) and "<prefix>:wake" (payload: "<shard> <due ms>").
--
-- The outbox: every script that changes a job appends the change to its shard's stream in
-- the same atomic step, fields t = "<idkey> <from> <to> <ver> <attempts> <runAt> <at> <key>"
-- and w = who acted ("<instance>\x1f<thread>\x1f<client host>", passed by the caller); a
-- replacement also carries r = "<priority> <ttr> <tries>" and b = the new body. The MySQL
-- journal reads the streams through a consumer group and acknowledges entries once they are
-- committed, so MySQL learns of every transition even when the script's reply is lost or the
-- daemon that ran it dies a moment later.
--
-- A job record is cmsgpack.pack(ver, state, attempts, priority, ttr, tries, runAt, topic,
-- bizKey, body[, backoff[, traceparent[, tracestate]]]) — backoff only when the job was pushed
-- with its own, the W3C trace context (src/core/trace.h) only when it has one (backoff nil then
-- if it has none): a job with neither pays nothing for them. `ver` grows by
-- one on every transition; MySQL applies a batched update only when its version is newer, so
-- journal batches that arrive late never roll a job back.

local DELAYED, READY, RESERVED, FINISHED, DELETED, DEAD = 1, 2, 3, 4, 5, 6
local FAR = 8 -- MySQL only: a job due beyond the horizon (src/core/job.h); never a record's state
local FENCE_RETRY_MS = 500 -- a fenced shard's mover looks again this soon (mark.lua, move.lua)
local PRIO_SCALE = 10000000000000 -- 1e13 ms: later than year 2286, so priority always dominates

local base = string.sub(KEYS[1], 1, -5) -- strip "jobs"
local prefix = string.match(base, "^(.*):{")
local shard = string.match(base, ":{(%d+)}:$") or string.match(base, ":{(%d+)%.%d+}:$")
local K_JOBS, K_DELAY, K_COUNT = KEYS[1], base .. "delay", base .. "count"

local function ready_key(topic) return base .. "ready:" .. topic end
local function dead_key(topic) return base .. "dead:" .. topic end
local function biz_key(topic) return base .. "biz:" .. topic end

local STATE_NAME = { "delayed", "ready", "reserved", "finished", "deleted", "dead" }

local function load_job(idkey)
    local rec = redis.call("HGET", K_JOBS, idkey)
    if not rec then return nil end
    local ver, st, att, prio, ttr, tries, runat, topic, biz, body, bo, tp, ts = cmsgpack.unpack(rec)
    return { ver = ver, st = st, att = att, prio = prio, ttr = ttr, tries = tries,
             runat = runat, topic = topic, biz = biz, body = body, bo = bo, tp = tp, ts = ts }
end

-- The checked twin of load_job, for scripts that walk many entries (move, reserve): one
-- record that does not decode must not abort the script half-way, after it already removed
-- entries it would then never process. Returns the job, or nil and why: "missing" (an index
-- entry with no record) or "corrupt" (plus the raw record).
local function check_job(idkey)
    local rec = redis.call("HGET", K_JOBS, idkey)
    if not rec then return nil, "missing" end
    local ok, ver, st, att, prio, ttr, tries, runat, topic, biz, body, bo, tp, ts = pcall(cmsgpack.unpack, rec)
    if not ok or type(ver) ~= "number" or type(st) ~= "number" or type(att) ~= "number"
        or type(prio) ~= "number" or type(ttr) ~= "number" or type(tries) ~= "number"
        or type(runat) ~= "number" or type(topic) ~= "string" or type(biz) ~= "string"
        or type(body) ~= "string" or (bo ~= nil and type(bo) ~= "number")
        or (tp ~= nil and type(tp) ~= "string") or (ts ~= nil and type(ts) ~= "string") then
        return nil, "corrupt", rec
    end
    return { ver = ver, st = st, att = att, prio = prio, ttr = ttr, tries = tries,
             runat = runat, topic = topic, biz = biz, body = body, bo = bo, tp = tp, ts = ts }
end

-- A record check_job refused, taken out of the way: the index entry that led to it is removed
-- by the caller; a corrupt record moves to base.."bad" (id key -> raw record) for the operator,
-- so the job is absent from Redis and `/reStore/{id}` rebuilds it from MySQL. The caller
-- reports how many it set aside (the C side counts and logs them).
local function set_aside(idkey, why, rec)
    if why == "corrupt" then
        redis.call("HSET", base .. "bad", idkey, rec)
        redis.call("HDEL", K_JOBS, idkey)
    end
end

local function pack_job(j)
    if j.tp then -- j.bo may be nil here: packed as nil, a place kept
        if j.ts then
            return cmsgpack.pack(j.ver, j.st, j.att, j.prio, j.ttr, j.tries, j.runat, j.topic, j.biz, j.body, j.bo,
                j.tp, j.ts)
        end
        return cmsgpack.pack(j.ver, j.st, j.att, j.prio, j.ttr, j.tries, j.runat, j.topic, j.biz, j.body, j.bo, j.tp)
    end
    if j.bo then
        return cmsgpack.pack(j.ver, j.st, j.att, j.prio, j.ttr, j.tries, j.runat, j.topic, j.biz, j.body, j.bo)
    end
    return cmsgpack.pack(j.ver, j.st, j.att, j.prio, j.ttr, j.tries, j.runat, j.topic, j.biz, j.body)
end

-- A job's optional values as push.lua (a job with a bizKey) and restore.lua are given them: ''
-- for none, else a record's tail (src/core/jobpack.h): backoff (or nil)[, traceparent[,
-- tracestate]]. Returns backoff, traceparent, tracestate (each nil when absent).
local function unpack_tail(s)
    if s == "" then return nil end
    return cmsgpack.unpack(s)
end

-- A job's trace context appended to a reply entry `e` that has it (nothing for a job without:
-- the reply of a job without one is what it was before trace context existed).
local function reply_trace(e, j)
    if j.tp then
        e[#e + 1] = j.tp
        e[#e + 1] = j.ts or false
    end
    return e
end

local function save_job(idkey, j)
    redis.call("HSET", K_JOBS, idkey, pack_job(j))
end

local function count(st, topic, delta)
    local field = STATE_NAME[st] .. ":" .. topic
    if redis.call("HINCRBY", K_COUNT, field, delta) <= 0 then
        redis.call("HDEL", K_COUNT, field)
    end
end

-- Running totals per topic, never decremented, read by GET /throughput: the console's rates
-- are their differences over time. what = "pushed" (new jobs), "delivered" (deliveries,
-- redeliveries included), "redelivered" and "late" (the ms past due of the first deliveries,
-- summed). Counted so that a first delivery on time, the common case, costs one HINCRBY.
local K_TALLY = base .. "tally"
local function tally(topic, what, n)
    redis.call("HINCRBY", K_TALLY, what .. ":" .. topic, n)
end

local function ready_score(prio, due) return prio * PRIO_SCALE + due end

-- a > b in the order Redis gives members of one score (bytes); Lua's own string comparison
-- follows the server's locale.
local function bytes_after(a, b)
    for i = 1, math.min(#a, #b) do
        local x, y = string.byte(a, i), string.byte(b, i)
        if x ~= y then return x > y end
    end
    return #a > #b
end

-- The rank in zset `key` of the first entry after (after_score, after_idkey), whether that
-- entry is still there or not: past the lower scores, then a binary search among the equal
-- ones ('' after_score: 0, the first). Walks of an index a call at a time resume from here
-- (topicjobs.lua, purge.lua).
local function rank_after(key, after_score, after_idkey)
    if after_score == "" then return 0 end
    local rank = redis.call("ZCOUNT", key, "-inf", "(" .. after_score)
    local hi = redis.call("ZCOUNT", key, "-inf", after_score)
    while rank < hi do
        local mid = math.floor((rank + hi) / 2)
        if bytes_after(redis.call("ZRANGE", key, mid, mid)[1], after_idkey) then hi = mid else rank = mid + 1 end
    end
    return rank
end

-- `cmd key` with the elements of `list` (field/value or score/member pairs), in commands of
-- at most 1,000 pairs: unpack() is bounded by Lua's C stack (LUAI_MAXCSTACK = 8000 values).
local function call_in_chunks(cmd, key, list)
    local size = #list
    for first = 1, size, 2000 do
        redis.call(cmd, key, unpack(list, first, math.min(first + 1999, size)))
    end
end

-- Topics made ready by this script run; published once each at the end.
local ready_topics = {}
local function notify_ready(topic) ready_topics[topic] = true end

-- Writes gathered over a script's jobs and made at the end by a few multi-element commands
-- (push.lua, restore.lua, move.lua, reserve.lua): a command per job is most of a big call's
-- time (each redis.call costs more than the work of one element of a multi-element one).
-- The scripts run atomically, so nobody sees the writes in another order; a script that reads
-- a key it changed must write the gathered changes first (write_gathered). Gathered:
--   records   id key -> packed record (HSET)       delayed  score, id key (ZADD delay zset)
--   ready     topic -> score, id key (ZADD)       gone     id keys whose records leave (HDEL)
--   counted   "<state>:<topic>" -> delta, applied once per field (a field at 0 or below goes).
local G = nil -- made on first use: most scripts never gather, and every script runs this
local function gathered()
    if not G then G = { records = {}, delayed = {}, ready = {}, gone = {}, counted = {} } end
    return G
end
local function count_later(st, topic, delta)
    local field = STATE_NAME[st] .. ":" .. topic
    local counted = gathered().counted
    counted[field] = (counted[field] or 0) + delta
end
local function save_later(idkey, record)
    local records = gathered().records
    records[#records + 1] = idkey
    records[#records + 1] = record
end
local function delay_later(idkey, score)
    local delayed = gathered().delayed
    delayed[#delayed + 1] = score
    delayed[#delayed + 1] = idkey
end
local function ready_later(idkey, topic, score)
    local ready = gathered().ready
    local list = ready[topic]
    if not list then
        list = {}
        ready[topic] = list
    end
    list[#list + 1] = score
    list[#list + 1] = idkey
    notify_ready(topic)
end
local function drop_later(idkey)
    local gone = gathered().gone
    gone[#gone + 1] = idkey
end
-- gather() files a new job `idkey` (its packed record, placed in `st` = DELAYED or READY);
-- `due` is its runAt as the decimal string the caller sent (ZADD takes it as it is), `prio`
-- its priority.
local function gather(idkey, record, st, topic, due, prio)
    if st == DELAYED then
        delay_later(idkey, due)
    else
        ready_later(idkey, topic, ready_score(prio, tonumber(due)))
    end
    save_later(idkey, record)
    count_later(st, topic, 1)
end
-- Make the gathered writes; returns the counter changes made, "<state>:<topic>" -> delta.
local function write_gathered()
    if not G then return {} end
    local g = G
    G = nil
    call_in_chunks("HSET", K_JOBS, g.records)
    call_in_chunks("HDEL", K_JOBS, g.gone)
    call_in_chunks("ZADD", K_DELAY, g.delayed)
    for topic, list in pairs(g.ready) do
        call_in_chunks("ZADD", ready_key(topic), list)
    end
    for field, delta in pairs(g.counted) do
        if delta ~= 0 and redis.call("HINCRBY", K_COUNT, field, delta) <= 0 then
            redis.call("HDEL", K_COUNT, field)
        end
    end
    return g.counted
end
local function publish_ready()
    for topic in pairs(ready_topics) do
        redis.call("PUBLISH", prefix .. ":ready", topic)
    end
end

-- Put job `idkey` on the delay zset (due > now) or its topic's ready zset.
local function place(idkey, j, now)
    if j.runat > now then
        j.st = DELAYED
        redis.call("ZADD", K_DELAY, j.runat, idkey)
    else
        j.st = READY
        redis.call("ZADD", ready_key(j.topic), ready_score(j.prio, j.runat), idkey)
        notify_ready(j.topic)
    end
    count(j.st, j.topic, 1)
end

-- Take job `idkey` off whatever structure holds it in state j.st.
local function unplace(idkey, j)
    if j.st == DELAYED or j.st == RESERVED then
        redis.call("ZREM", K_DELAY, idkey)
    elseif j.st == READY then
        redis.call("ZREM", ready_key(j.topic), idkey)
    elseif j.st == DEAD then
        redis.call("ZREM", dead_key(j.topic), idkey)
    end
    count(j.st, j.topic, -1)
end

-- After adding entries to the delay zset (`added`: a set of their id keys): when one of them
-- is now the earliest entry, tell every mover so the one that owns this shard can wake
-- sooner than it planned.
local function wake_if_head_in(added)
    local head = redis.call("ZRANGE", K_DELAY, 0, 0, "WITHSCORES")
    if head[1] and added[head[1]] then
        redis.call("PUBLISH", prefix .. ":wake", shard .. " " .. head[2])
    end
end
local function wake_if_head(idkey) wake_if_head_in({ [idkey] = true }) end

-- The bizKey index only ever points at a live job; drop it when this job leaves.
local function biz_release(idkey, j)
    if j.biz ~= "" then
        local bk = biz_key(j.topic)
        if redis.call("HGET", bk, j.biz) == idkey then
            redis.call("HDEL", bk, j.biz)
        end
    end
end

-- While a restore runs or a pager pages this shard, remember jobs that end so that neither can
-- bring them back (a pager that died after putting a job in Redis pages it again; it must not
-- come back once it finished). One EXISTS for both flags.
-- Only C code sets or clears the flags, never a script, so one look per script run is enough.
local tombstones_wanted = nil
local function tombstone(idkey, now)
    if tombstones_wanted == nil then
        tombstones_wanted = redis.call("EXISTS", base .. "restoring", base .. "paging") > 0
    end
    if tombstones_wanted then
        redis.call("ZADD", base .. "gone", now, idkey)
    end
end

-- The bizKey index entry of a far job (MySQL only, state 'far') is "<idkey>@<runAt>", so a
-- push can answer a duplicate with its due time; a job in Redis has its plain idkey. Returns the
-- holder's idkey and, for a far holder, its runAt.
local function biz_holder(topic, biz)
    local v = redis.call("HGET", biz_key(topic), biz)
    if not v then return nil end
    local id, runat = string.match(v, "^(.-)@(%d+)$")
    if id then return id, tonumber(runat) end
    return v, nil
end

-- A topic's settings (src/core/topicconf.h): "<paused> <rate> <backoff> <maxBackoff> <seq>"; a topic
-- without a field has the defaults (TOPICCONF_DEFAULT_*).
local DEFAULT_MAX_BACKOFF = 3600000
-- A topic's settings from the value stored for it (nil: the defaults).
local function topic_conf_of(v)
    if v then
        local p, rate, bo, maxb = string.match(v, "^(%d) (%d+) (%d+) (%d+) ")
        if p then
            return { paused = p == "1", rate = tonumber(rate), backoff = tonumber(bo), maxb = tonumber(maxb) }
        end
    end
    return { paused = false, rate = 0, backoff = 0, maxb = DEFAULT_MAX_BACKOFF }
end

local function topic_conf(topic)
    return topic_conf_of(redis.call("HGET", base .. "topic", topic))
end

-- The shard's fence (mark.lua): a field of the topic hash ("~fenced", like "~synced": no topic
-- starts with "~"), so reserve.lua reads it with its first topic's settings in one command.
local K_FENCE_FIELD = "~fenced"
local function fenced()
    return redis.call("HEXISTS", base .. "topic", K_FENCE_FIELD) == 1
end

-- How long after a failed or expired attempt number j.att the job is due again:
-- min(maxBackoff, backoff * 2^(attempt-1)), the job's own backoff (set at push) before its topic's.
local function backoff_delay(j, conf)
    local b = j.bo or conf.backoff
    if b <= 0 then return 0 end
    local d = b * 2 ^ math.max(j.att - 1, 0)
    if d > conf.maxb then d = conf.maxb end
    return math.floor(d)
end

-- A topic's token bucket for its rate (deliveries per second across the fleet): it holds at
-- most a tenth of a second's tokens (at least one), so a backlog is released at the rate, not
-- in a burst. `now` comes from the callers' clocks: a call from an instance whose clock is
-- behind adds nothing rather than moving the bucket back.
local function take_tokens(topic, rate, now)
    local key = base .. "bucket:" .. topic
    local cap = math.max(1, rate / 10)
    local v = redis.call("HMGET", key, "tok", "at")
    local tok, at = tonumber(v[1]), tonumber(v[2])
    if not tok or not at then tok, at = cap, now end
    if now > at then
        tok = math.min(cap, tok + (now - at) * rate / 1000)
        at = now
    end
    return { key = key, tok = tok, at = at }
end
local function spend_tokens(b, n)
    redis.call("HSET", b.key, "tok", tostring(b.tok - n), "at", b.at)
    redis.call("PEXPIRE", b.key, 60000) -- an idle topic's bucket is full again long before
end

local function is_live(st) return st == DELAYED or st == READY or st == RESERVED end

local K_LOG = base .. "log"
local function log_transition(idkey, from, to, j, now, key, who)
    redis.call("XADD", K_LOG, "*", "t",
        idkey .. " " .. from .. " " .. to .. " " .. j.ver .. " " .. j.att .. " " .. j.runat .. " " .. now .. " " .. key,
        "w", who)
end

-- Delete job `idkey` (loaded as j) from Redis, as a delete does: out of its structure and the
-- jobs hash, its bizKey released, a tombstone while a restore or a pager needs one, the
-- transition logged. Returns the state it had.
local function delete_job(idkey, j, now, who)
    unplace(idkey, j)
    redis.call("HDEL", K_JOBS, idkey)
    biz_release(idkey, j)
    tombstone(idkey, now)
    local from = j.st
    j.ver = j.ver + 1
    log_transition(idkey, from, DELETED, j, now, "jobs", who)
    return from
end
