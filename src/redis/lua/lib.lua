-- lib.lua — the shared part of the scripts' Redis Functions library (scripts/embed-lua.py): its
-- top level runs once, when Redis loads the library, so its helpers are made once; every other
-- file is one function whose body starts with begin(KEYS) (the end of this file), which sets the
-- shard's keys and clears what a call gathers. Nothing here may keep state from one call to the
-- next except through begin.
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
--   base.."gr:"..topic    zset   a grouped topic's ready jobs of groups (flow control by key, below)
--   base.."gq:"..topic    list   its groups that may deliver now, in round-robin order
--   base.."gs:"..topic    hash   group -> "<held> <reserved> <delayed> <ready>[ <lists> <tat>]"
--   base.."gt:"..topic    list   its groups held by their rate (groupRate), in the order held
--   base.."gz:"..topic    list   its groups with nothing left whose rate's tat is still ahead
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
-- bizKey, body[, backoff[, traceparent[, tracestate[, group[, ord[, hold]]]]]]) — backoff only
-- when the job was pushed with its own, the W3C trace context (src/core/trace.h) only when it
-- has one, the group (flow control by key) only when it has one, with its ord (its place among
-- its group's ready jobs) and hold (1: it holds one of its group's slots) once it has them;
-- an absent value before a present one is nil: a job with none pays nothing for them. `ver` grows by
-- one on every transition; MySQL applies a batched update only when its version is newer, so
-- journal batches that arrive late never roll a job back.

local DELAYED, READY, RESERVED, FINISHED, DELETED, DEAD = 1, 2, 3, 4, 5, 6
local FAR = 8 -- MySQL only: a job due beyond the horizon (src/core/job.h); never a record's state
local FENCE_RETRY_MS = 500 -- a fenced shard's mover looks again this soon (mark.lua, move.lua)
local PRIO_SCALE = 10000000000000 -- 1e13 ms: later than year 2286, so priority always dominates

-- The shard a call works on, its keys made from KEYS[1] by begin (the end of this file) at the
-- start of every call.
local base, prefix, shard, K_JOBS, K_DELAY, K_COUNT, K_TALLY, K_LOG

-- An integral number as the decimal string Redis parses. A number passed to redis.call, or joined
-- to a string with "..", is formatted by printf's %g (Redis 7.0: "%.17g"; Lua: "%.14g"), which
-- costs glibc a multi-precision division for a 13-digit ms time: ~1 us of every reserve and
-- finish went to it. "%d" is an integer's plain digit loop.
-- (string.format is looked up at call time: the library's top level, run at load, sees no `string`)
local function decimal(n) return string.format("%d", n) end

local function ready_key(topic) return base .. "ready:" .. topic end
local function dead_key(topic) return base .. "dead:" .. topic end
local function biz_key(topic) return base .. "biz:" .. topic end

local STATE_NAME = { "delayed", "ready", "reserved", "finished", "deleted", "dead" }

local function job_of_record(rec)
    local ver, st, att, prio, ttr, tries, runat, topic, biz, body, bo, tp, ts, grp, ord, hold = cmsgpack.unpack(rec)
    return { ver = ver, st = st, att = att, prio = prio, ttr = ttr, tries = tries, runat = runat, topic = topic,
             biz = biz, body = body, bo = bo, tp = tp, ts = ts, grp = grp, ord = ord, hold = hold }
end

local function load_job(idkey)
    local rec = redis.call("HGET", K_JOBS, idkey)
    if not rec then return nil end
    return job_of_record(rec)
end

-- The checked twin of load_job, for scripts that walk many entries (move, reserve): one
-- record that does not decode must not abort the script half-way, after it already removed
-- entries it would then never process. Returns the job, or nil and why: "missing" (an index
-- entry with no record) or "corrupt" (plus the raw record).
local function check_job(idkey)
    local rec = redis.call("HGET", K_JOBS, idkey)
    if not rec then return nil, "missing" end
    local ok, ver, st, att, prio, ttr, tries, runat, topic, biz, body, bo, tp, ts, grp, ord, hold =
        pcall(cmsgpack.unpack, rec)
    if not ok or type(ver) ~= "number" or type(st) ~= "number" or type(att) ~= "number"
        or type(prio) ~= "number" or type(ttr) ~= "number" or type(tries) ~= "number"
        or type(runat) ~= "number" or type(topic) ~= "string" or type(biz) ~= "string"
        or type(body) ~= "string" or (bo ~= nil and type(bo) ~= "number")
        or (tp ~= nil and type(tp) ~= "string") or (ts ~= nil and type(ts) ~= "string")
        or (grp ~= nil and type(grp) ~= "string") or (ord ~= nil and type(ord) ~= "number")
        or (hold ~= nil and type(hold) ~= "number") then
        return nil, "corrupt", rec
    end
    return { ver = ver, st = st, att = att, prio = prio, ttr = ttr, tries = tries, runat = runat, topic = topic,
             biz = biz, body = body, bo = bo, tp = tp, ts = ts, grp = grp, ord = ord, hold = hold }
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
    if j.grp then -- nil places kept up to the last value present
        if j.hold then
            return cmsgpack.pack(j.ver, j.st, j.att, j.prio, j.ttr, j.tries, j.runat, j.topic, j.biz, j.body, j.bo,
                j.tp, j.ts, j.grp, j.ord, j.hold)
        elseif j.ord then
            return cmsgpack.pack(j.ver, j.st, j.att, j.prio, j.ttr, j.tries, j.runat, j.topic, j.biz, j.body, j.bo,
                j.tp, j.ts, j.grp, j.ord)
        end
        return cmsgpack.pack(j.ver, j.st, j.att, j.prio, j.ttr, j.tries, j.runat, j.topic, j.biz, j.body, j.bo,
            j.tp, j.ts, j.grp)
    end
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
-- tracestate[, group]]]. Returns backoff, traceparent, tracestate, group (each nil when absent).
local function unpack_tail(s)
    if s == "" then return nil end
    return cmsgpack.unpack(s)
end

-- A job's trace context appended to a reply entry `e` that has it, then its group (false
-- places for an absent trace context before a group): nothing for a job with neither, whose
-- reply is what it was before trace context existed.
local function reply_trace(e, j)
    if j.tp or j.grp then
        e[#e + 1] = j.tp or false
        e[#e + 1] = j.ts or false
    end
    if j.grp then e[#e + 1] = j.grp end
    return e
end

local function save_job(idkey, j)
    redis.call("HSET", K_JOBS, idkey, pack_job(j))
end

local function count(st, topic, delta)
    local field = STATE_NAME[st] .. ":" .. topic
    if redis.call("HINCRBY", K_COUNT, field, decimal(delta)) <= 0 then
        redis.call("HDEL", K_COUNT, field)
    end
end

-- Running totals per topic, never decremented, read by GET /throughput: the console's rates
-- are their differences over time. what = "pushed" (new jobs), "delivered" (deliveries,
-- redeliveries included), "redelivered" and "late" (the ms past due of the first deliveries,
-- summed). Counted so that a first delivery on time, the common case, costs one HINCRBY.
local function tally(topic, what, n)
    redis.call("HINCRBY", K_TALLY, what .. ":" .. topic, decimal(n))
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

-- Topics made ready by this call (nil: none yet); published once each at the end.
local ready_topics = nil
local function notify_ready(topic)
    if not ready_topics then ready_topics = {} end
    ready_topics[topic] = true
end

-- Writes gathered over a script's jobs and made at the end by a few multi-element commands
-- (push.lua, restore.lua, move.lua, reserve.lua): a command per job is most of a big call's
-- time (each redis.call costs more than the work of one element of a multi-element one).
-- The scripts run atomically, so nobody sees the writes in another order; a script that reads
-- a key it changed must write the gathered changes first (write_gathered). Gathered:
--   records   id key -> packed record (HSET)       delayed  score, id key (ZADD delay zset)
--   ready     topic -> score, id key (ZADD)       gone     id keys whose records leave (HDEL)
--   counted   "<state>:<topic>" -> delta, applied once per field (a field at 0 or below goes).
local G = nil -- made on first use: most calls never gather (begin resets it)
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
local function delay_later(idkey, score) -- score: a number, or its decimal string
    local delayed = gathered().delayed
    delayed[#delayed + 1] = type(score) == "number" and decimal(score) or score
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
        if delta ~= 0 and redis.call("HINCRBY", K_COUNT, field, decimal(delta)) <= 0 then
            redis.call("HDEL", K_COUNT, field)
        end
    end
    return g.counted
end
local function publish_ready()
    if not ready_topics then return end
    for topic in pairs(ready_topics) do
        redis.call("PUBLISH", prefix .. ":ready", topic)
    end
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

-- A topic's settings (src/core/topicconf.h): "<paused> <rate> <backoff> <maxBackoff> [g<groupConcurrency>
-- <fifo 0|1> <groupRate> ]<seq>"; a topic without a field has the defaults (TOPICCONF_DEFAULT_*).
-- The " g" part is there only for a topic with group settings (groups = true below), or one whose
-- settings went but whose grouped ready jobs are still being served (topicset.lua: "g0 0 0").
local DEFAULT_MAX_BACKOFF = 3600000
-- A topic's settings from the value stored for it (nil: the defaults).
local function topic_conf_of(v)
    if v then
        local p, rate, bo, maxb = string.match(v, "^(%d) (%d+) (%d+) (%d+) ")
        if p then
            local c = { paused = p == "1", rate = tonumber(rate), backoff = tonumber(bo), maxb = tonumber(maxb),
                        groups = false, gconc = 0, gfifo = false, grate = 0 }
            local gc, gf, gr = nil, nil, nil
            if string.find(v, "g", 9, true) then -- (a plain find first: most topics have no g part)
                gc, gf, gr = string.match(v, " g(%d+) (%d) (%d+) ")
            end
            if gc == "0" and gf == "0" and gr == "0" then
                c.drain = true -- settings gone, grouped ready jobs left on "gr:" (topicset.lua)
            elseif gc then
                c.groups, c.gfifo, c.grate = true, gf == "1", tonumber(gr)
                c.gconc = c.gfifo and 1 or tonumber(gc)
            end
            return c
        end
    end
    return { paused = false, rate = 0, backoff = 0, maxb = DEFAULT_MAX_BACKOFF, groups = false, gconc = 0,
             gfifo = false, grate = 0 }
end

local function topic_conf(topic)
    return topic_conf_of(redis.call("HGET", base .. "topic", topic))
end

-- ---- Flow control by key (contract "Flow control by key"; docs/architecture.md "Groups") ----
-- A job may belong to a group of its topic (j.grp). Every grouped job, whatever its topic's
-- settings, is counted in its group's field of base.."gs:"..topic: "<held> <reserved> <delayed>
-- <ready>[ <lists> <tat>]" (held = slots in use: jobs delivered under the group's limit and not
-- yet finished, dead or deleted; under fifo also a failed one waiting out its retry; ready = its
-- ready jobs on the topic's ready zset — those on the group's range, below, are counted by the
-- range itself; lists = which of the three lists below hold the group, a sum of G_ROUND,
-- G_HELD, G_IDLE; tat = its groupRate's theoretical arrival time, GCRA, in ms). The two last
-- are written only when not 0. The field goes when the group has nothing counted, is on no
-- list and its rate remembers nothing (tat passed): an idle group costs nothing.
-- A topic with group settings (conf.groups) keeps its groups' ready jobs apart from its ready
-- zset, in one zset per topic ("gr:") whose members all score 0 and sort by bytes:
-- "<group>\0<ord, 14 digits><idkey>", ord the ready score (priority * 1e13 + due ms) — so a
-- group's jobs are one range, in the order the ready zset would keep them, and its head is a
-- ZRANGEBYLEX ... LIMIT 0 1 away (O(log n)). The job's record keeps its ord so that it can be
-- found again. Groups wait their turn on lists of names, each entry a few bytes (a zset member
-- would cost ~100): groups that may deliver (ready jobs, a free slot, a token) on the round
-- ("gq:"): reserve serves its head and puts the group back at its tail when it may deliver
-- again (round robin); a group held by its rate on "gt:", in the order they were held — each
-- was held right after a delivery, until at most one interval later, so the head comes due
-- first (to within the burst, which the group's tat makes up for) and reserve's sweep brings
-- due groups back to the round; a group with nothing left whose tat is still ahead on "gz:",
-- until the sweep finds its tat passed and drops its field. Entries are never looked for: a
-- group that stops being able to deliver (its last ready job deleted, say) keeps its entry,
-- and whoever pops an entry that no longer holds drops it — each entry is pushed once and
-- popped once, so the work stays O(1) per change; the field's lists say whether an entry is
-- there, so a group is never on a list twice.
-- Ungrouped jobs, and every job of a topic without group settings, go as they always went.
-- The group library: made once, when the library is loaded, like every function here.
local GL = {}
do
    function GL.gready_key(topic) return base .. "gr:" .. topic end
    function GL.gq_key(topic) return base .. "gq:" .. topic end
    function GL.gs_key(topic) return base .. "gs:" .. topic end
    function GL.gt_key(topic) return base .. "gt:" .. topic end
    function GL.gz_key(topic) return base .. "gz:" .. topic end
    function GL.gmember(g, ord, idkey) return g .. "\0" .. string.format("%014d", ord) .. idkey end

    GL.gconfs = nil -- topic -> its settings, read once per call (grouped jobs only; begin resets it)
    function GL.gconf(topic)
        local confs = GL.gconfs
        if not confs then
            confs = {}
            GL.gconfs = confs
        end
        local c = confs[topic]
        if not c then
            c = topic_conf(topic)
            confs[topic] = c
        end
        return c
    end

    GL.SLOT = { [RESERVED] = 2, [DELAYED] = 3, [READY] = 4 }
    -- The field of `gs` a grouped job in state st counts in (nil: none) — a ready job on its group's
    -- range (j.ord set: lib.lua place) is counted by the range.
    function GL.g_slot(j, st)
        if st == READY and j.ord then return nil end
        return GL.SLOT[st]
    end

    -- The lists a group is on (s[5], a sum of these), and their keys.
    local G_ROUND, G_HELD, G_IDLE = 1, 2, 4
    local LIST_KEY = { [G_ROUND] = GL.gq_key, [G_HELD] = GL.gt_key, [G_IDLE] = GL.gz_key }
    local function on(s, list) return math.floor(s[5] / list) % 2 == 1 end
    -- Put the group on a list it is not on (the caller writes its field).
    local function enlist(topic, g, s, list)
        s[5] = s[5] + list
        return redis.call("RPUSH", LIST_KEY[list](topic), g)
    end
    -- The group's entry at the head of a list was just popped.
    local function unlist(s, list)
        if on(s, list) then s[5] = s[5] - list end
    end
    GL.G_ROUND, GL.G_HELD, GL.G_IDLE, GL.g_on, GL.g_unlist = G_ROUND, G_HELD, G_IDLE, on, unlist

    -- Has group g ready jobs on its range? (one lookup in the topic's "gr:", O(log n))
    function GL.g_has_ready(topic, g)
        return redis.call("ZRANGEBYLEX", GL.gready_key(topic), "[" .. g .. "\0", "(" .. g .. "\1", "LIMIT", 0, 1)[1] ~= nil
    end
    function GL.gs_get(topic, g)
        local v = redis.call("HGET", GL.gs_key(topic), g)
        if v then
            local h, r, d, q, l, t = string.match(v, "^(%d+) (%d+) (%d+) (%d+) ?(%d*) ?([%d.]*)$")
            if h then
                return { tonumber(h), tonumber(r), tonumber(d), tonumber(q), tonumber(l) or 0, tonumber(t) or 0 }
            end
        end
        return { 0, 0, 0, 0, 0, 0 }
    end
    -- Write the group's field back. One with nothing counted and on no list goes — unless its rate
    -- still remembers a tat ahead of now (nil: Redis's clock): then it waits on "gz:" for it to pass.
    function GL.gs_put(topic, g, s, now)
        for i = 1, 4 do
            if s[i] < 0 then s[i] = 0 end
        end
        if s[1] + s[2] + s[3] + s[4] + s[5] == 0 and s[6] > 0 then
            if GL.gconf(topic).grate == 0 then now = math.huge end -- no rate: its tat means nothing
            if not now then
                local t = redis.call("TIME")
                now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
            end
            if s[6] > now then
                enlist(topic, g, s, G_IDLE)
            else
                s[6] = 0
            end
        end
        if s[1] + s[2] + s[3] + s[4] + s[5] == 0 then
            redis.call("HDEL", GL.gs_key(topic), g)
        elseif s[5] + s[6] == 0 then
            redis.call("HSET", GL.gs_key(topic), g, s[1] .. " " .. s[2] .. " " .. s[3] .. " " .. s[4])
        else
            redis.call("HSET", GL.gs_key(topic), g,
                s[1] .. " " .. s[2] .. " " .. s[3] .. " " .. s[4] .. " " .. s[5] .. " "
                .. string.format(s[6] % 1 == 0 and "%d" or "%.2f", s[6])) -- a rate's interval may be fractional
        end
    end

    -- groupRate as a GCRA: one token every 1000/rate ms, a burst of at most a tenth of a second's
    -- tokens (at least one), as the topic's own bucket (take_tokens).
    function GL.g_interval(conf) return 1000 / conf.grate end
    function GL.g_burst(conf) return (math.max(1, math.floor(conf.grate / 10)) - 1) * 1000 / conf.grate end
    function GL.g_rate_ok(s, conf, now)
        return conf.grate == 0 or s[6] - GL.g_burst(conf) <= now
    end

    -- Put group g at the back of the round when it may deliver: ready jobs, a free slot, a token;
    -- with ready jobs and a slot but no token, on "gt:" for reserve's sweep. A round that was empty
    -- is announced on "<prefix>:ready" (consumers park only when they found nothing, so with groups
    -- in the round nobody waits for one more); `quiet`: not even then (reserve.lua putting back
    -- the group it just served: its caller is not parked). Writes the field when a list took the
    -- group, and then says so (true).
    function GL.g_wake(topic, g, conf, s, now, quiet)
        if not (conf.groups or conf.drain) or (conf.gconc > 0 and s[1] >= conf.gconc) then return false end
        -- (a group on "gt:" waits for the sweep even once its token is due: served before it, it
        -- would leave an entry there older than its new tat, ahead of groups due sooner)
        if on(s, G_ROUND) or on(s, G_HELD) or not GL.g_has_ready(topic, g) then return false end
        if not GL.g_rate_ok(s, conf, now) then
            enlist(topic, g, s, G_HELD)
        elseif enlist(topic, g, s, G_ROUND) == 1 and not quiet then
            notify_ready(topic)
        end
        GL.gs_put(topic, g, s, now)
        return true
    end

    -- The group's field changed (s): the group goes on the list it now belongs on (g_wake, which
    -- writes the field), or else its field is written as it stands.
    function GL.g_wake_or_put(topic, g, conf, s, now, quiet)
        if not GL.g_wake(topic, g, conf, s, now, quiet) then GL.gs_put(topic, g, s, now) end
    end

    -- A grouped job leaves state `from` and/or enters `to` (nil: none of the counted states), its
    -- hold changing by `hold` (-1, 0, +1): its group's counts follow, and the group's turn. A group
    -- whose last ready job left its range keeps its place in the round until the round reaches it.
    function GL.g_change(j, from, to, hold, now)
        local s = GL.gs_get(j.topic, j.grp)
        local out_of, into = GL.g_slot(j, from), GL.g_slot(j, to)
        if out_of then s[out_of] = s[out_of] - 1 end
        if into then s[into] = s[into] + 1 end
        s[1] = s[1] + hold
        local woke = false -- g_wake wrote the field
        if now and not (from == READY and j.ord) then woke = GL.g_wake(j.topic, j.grp, GL.gconf(j.topic), s, now) end
        if not woke and (out_of or into or hold ~= 0) then GL.gs_put(j.topic, j.grp, s, now) end
        return s
    end

    -- A grouped job that held a slot gives it back (finished, dead, deleted, or back in line).
    function GL.g_unhold(j, now)
        if j.hold then
            j.hold = nil
            GL.g_change(j, nil, nil, -1, now)
        end
    end

    -- The topic's group settings changed (topicset.lua): every group on a list goes back on the
    -- round, where reserve looks at it again under the new settings (one that cannot deliver is
    -- dropped as the round reaches it), its rate started afresh (a tat of the old rate would hold
    -- it to that rate for one more interval); with no group settings left and no grouped ready
    -- job (`keep` false), the lists go and no group is on one. Linear in the groups on the
    -- lists, once per change of settings. (A group on no list — at its limit — keeps its tat: once a
    -- slot frees it may wait up to one interval of the old rate.)
    function GL.g_relist(topic, keep)
        local gs, q = GL.gs_key(topic), GL.gq_key(topic)
        local groups, seen = {}, {}
        for _, list in ipairs({ G_ROUND, G_HELD, G_IDLE }) do
            local key = LIST_KEY[list](topic)
            for _, g in ipairs(redis.call("LRANGE", key, 0, -1)) do
                if not seen[g] then
                    seen[g] = true
                    groups[#groups + 1] = g
                end
            end
            redis.call("DEL", key)
        end
        for _, g in ipairs(groups) do
            local s = GL.gs_get(topic, g)
            s[5], s[6] = 0, 0
            if keep then enlist(topic, g, s, G_ROUND) end
            GL.gs_put(topic, g, s, 0)
        end
        return #groups
    end
end

-- Put job `idkey` on the delay zset (due > now) or its topic's ready zset — a grouped job of a
-- topic with group settings on its group's range instead. `at` (default j.runat) is the time
-- its ready score orders it by. A job that held its group's slot gives it back as it becomes
-- ready (under fifo it keeps its ord: it is its group's head again) or as it waits for a retry
-- (except under fifo, where the slot stays its own until it ends).
local function place(idkey, j, now, at)
    local conf = j.grp and GL.gconf(j.topic)
    if j.runat > now then
        j.st = DELAYED
        redis.call("ZADD", K_DELAY, j.runat, idkey)
    else
        j.st = READY
        if conf and conf.groups then
            if not (j.hold and conf.gfifo and j.ord) then j.ord = ready_score(j.prio, at or j.runat) end
            redis.call("ZADD", GL.gready_key(j.topic), 0, GL.gmember(j.grp, j.ord, idkey))
        else
            j.ord = nil
            redis.call("ZADD", ready_key(j.topic), ready_score(j.prio, at or j.runat), idkey)
        end
        notify_ready(j.topic)
    end
    count(j.st, j.topic, 1)
    if conf then
        local hold = 0
        if j.hold and (j.st ~= DELAYED or not conf.gfifo) then
            j.hold = nil
            hold = -1
        end
        GL.g_change(j, nil, j.st, hold, now)
    end
end

-- Take job `idkey` off whatever structure holds it in state j.st. Its hold, if any, stays
-- unless `now` is given: then the job is leaving for good (finished, deleted, ended by MySQL)
-- and gives its group's slot back in the same step (one update of its group's field).
local function unplace(idkey, j, now)
    if j.st == DELAYED or j.st == RESERVED then
        redis.call("ZREM", K_DELAY, idkey)
    elseif j.st == READY then
        -- a grouped job is on its group's range, unless it was made ready while its topic had no
        -- group settings (or its range was handed to the ready zset since: topicset.lua)
        if not (j.ord and redis.call("ZREM", GL.gready_key(j.topic), GL.gmember(j.grp, j.ord, idkey)) == 1) then
            redis.call("ZREM", ready_key(j.topic), idkey)
        end
    elseif j.st == DEAD then
        redis.call("ZREM", dead_key(j.topic), idkey)
    end
    count(j.st, j.topic, -1)
    if j.grp then
        local hold = 0
        if now and j.hold then
            j.hold = nil
            hold = -1
        end
        GL.g_change(j, j.st, nil, hold, hold ~= 0 and now or nil) -- only a freed slot can wake its group
    end
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

local function log_transition(idkey, from, to, j, now, key, who)
    redis.call("XADD", K_LOG, "*", "t", string.format("%s %d %d %d %d %d %d %s", idkey, from, to, j.ver, j.att, j.runat, now, key),
        "w", who)
end

-- Finish reserved job `idkey` (finish.lua, finishmany.lua): it is done and leaves Redis.
-- Returns {"ok", ver, attempts, runAt} | {"missing"} | {"state", state} | {"stale", attempts}.
local function finish_job(idkey, now, attempt, who, key)
    local j = load_job(idkey)
    if not j then return { "missing" } end
    if j.st ~= RESERVED then return { "state", j.st } end
    if attempt ~= 0 and attempt ~= j.att then return { "stale", j.att } end
    unplace(idkey, j, now) -- a grouped job's slot frees with it: its group's turn may come again
    redis.call("HDEL", K_JOBS, idkey)
    biz_release(idkey, j)
    tombstone(idkey, now)
    j.ver = j.ver + 1
    log_transition(idkey, RESERVED, FINISHED, j, now, key, who)
    return { "ok", j.ver, j.att, j.runat }
end

-- Delete job `idkey` (loaded as j) from Redis, as a delete does: out of its structure and the
-- jobs hash, its bizKey released, a tombstone while a restore or a pager needs one, the
-- transition logged. Returns the state it had.
local function delete_job(idkey, j, now, who)
    unplace(idkey, j, now)
    redis.call("HDEL", K_JOBS, idkey)
    biz_release(idkey, j)
    tombstone(idkey, now)
    local from = j.st
    j.ver = j.ver + 1
    log_transition(idkey, from, DELETED, j, now, "jobs", who)
    return from
end

-- The start of every call (each function's first line, scripts/embed-lua.py): the shard's keys
-- from KEYS[1], and what a call gathers set back to nothing. The keys are made again only when
-- the shard differs from the last call's (strings are interned: one pointer comparison).
local last_key = nil
local function begin(keys)
    local k = keys[1]
    if k ~= last_key then
        last_key = k
        base = string.sub(k, 1, -5) -- strip "jobs"
        prefix = string.match(base, "^(.*):{")
        shard = string.match(base, ":{(%d+)}:$") or string.match(base, ":{(%d+)%.%d+}:$")
        K_JOBS, K_DELAY, K_COUNT = k, base .. "delay", base .. "count"
        K_TALLY, K_LOG = base .. "tally", base .. "log"
    end
    ready_topics, G, tombstones_wanted, GL.gconfs = nil, nil, nil, nil
end
