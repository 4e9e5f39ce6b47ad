-- push.lua — add jobs to one or several shards, honouring bizKey dedupe and replace atomically.
-- KEYS    = <prefix>:{<shard>}:jobs of each shard the call adds jobs to: one under Redis
--           Cluster (a call stays in its slot), any number on a single Redis, where one call
--           for every shard a journal commit released costs Redis one call's fixed part
--           instead of one per shard (src/api/api_push.c, "to Redis")
-- ARGV    = for each key in turn: n, then n groups of 12 (the jobs of one or several requests
--           on that shard, in commit order):
--           idkey, topic, body, runAt, priority, ttr, tries, bizKey ('' = none), mode (replace + 2 ×
--           far + 4 × grouped: 0..7; a grouped job without a bizKey is placed one at a time; far = a bizKey job committed to MySQL alone, whose key alone is kept here),
--           now (the request's clock: due at or before it, the job starts ready, as its
--           committed row says), who (the request's actor, for the outbox), record: for a job
--           without a bizKey, its whole record as new (src/core/jobpack.c; state delayed when
--           runAt > now, else ready; its own backoff and trace context are in it), and then
--           body is ''; for a job with a bizKey, its record's tail instead (lib.lua
--           unpack_tail: '' = no backoff of its own and no trace context)
-- Returns one entry per job, in order (the first key's jobs, then the next key's...):
--   state                                        a new job without a bizKey, added in `state`
--   {"ok", idkey, runAt, ver, state, farheld}    a new job with a bizKey, added (farheld: the
--                                                idkey of a far job that held the key and that
--                                                this push replaced, to be deleted; '' = none)
--   {"far", idkey, runAt, farheld}               a far job's bizKey claimed (as "ok")
--   {"dup", idkey_existing, runAt}               a live job (near or far) holds (topic, bizKey);
--                                                nothing changed
--   {"replaced", idkey_existing, runAt, ver, from_state, state}  that delayed/ready job now has
--                                                this push's body, runAt, priority, ttr, tries,
--                                                backoff, trace context and group (logged with
--                                                field c = "<traceparent>[ <tracestate>]" when it
--                                                has one, g = its group when it has one)
--   {"conflict", idkey_existing}                 replace asked, but the holder is reserved
-- A new job is not logged: its creation is the message row the caller committed first.
--
-- Cost: a commit releases tens of pushes into one call, so a new job without a bizKey
-- (nothing else in this call can look it up) costs no Redis command of its own: its record,
-- made by the caller, its zset entry and its counter are gathered and written by a few
-- multi-element commands at the end, and the mover's wake check runs once. Its due time goes
-- to ZADD as the decimal string the caller sent, not as a Lua number (Redis would format that
-- with "%.17g"). Jobs with a bizKey take the one-at-a-time path: a later job of the same
-- call may look them up. One wake check a shard, at the end of its part, covers both paths:
-- the mover only needs to know the earliest entry once the shard's part is done.
local out = {}
local at = 1 -- ARGV[at]: the current key's n
for s = 1, #KEYS do
    if s > 1 then begin({ KEYS[s] }) end -- the next shard's keys (begin(KEYS) made the first's)
    local n = tonumber(ARGV[at])
    local added_delayed = {} -- idkey -> true: every job of this shard put on its delay zset
    local pushed = {}        -- topic -> new jobs with a bizKey, then all (lib.lua tally)

    for i = 0, n - 1 do
        local a = at + 1 + i * 12
        local idkey, topic, runat, now = ARGV[a], ARGV[a + 1], tonumber(ARGV[a + 3]), tonumber(ARGV[a + 9])
        local result = nil

        if ARGV[a + 7] == "" and tonumber(ARGV[a + 8]) >= 4 then
            -- no bizKey, a group: the record is made, and placed now (its group's counts and turn)
            local j = job_of_record(ARGV[a + 11])
            place(idkey, j, now)
            save_job(idkey, j)
            if j.st == DELAYED then added_delayed[idkey] = true end
            pushed[topic] = (pushed[topic] or 0) + 1
            result = j.st
        elseif ARGV[a + 7] == "" then -- no bizKey: the record is made
            local st = READY
            if runat > now then
                st = DELAYED
                added_delayed[idkey] = true
            end
            gather(idkey, ARGV[a + 11], st, topic, ARGV[a + 3], tonumber(ARGV[a + 4]))
            result = st
        else
            local body, prio, ttr, tries = ARGV[a + 2], tonumber(ARGV[a + 4]), tonumber(ARGV[a + 5]), tonumber(ARGV[a + 6])
            local mode, who = tonumber(ARGV[a + 8]), ARGV[a + 10]
            local biz, replace, far = ARGV[a + 7], mode % 2 == 1, mode % 4 >= 2
            local bo, tp, ts, grp = unpack_tail(ARGV[a + 11]) -- bo nil: the topic's
            local holder, far_runat = biz_holder(topic, biz)
            local j = holder and not far_runat and load_job(holder)
            local farheld = nil -- a far holder this push replaces
            if far_runat then
                if replace then
                    farheld = holder
                else
                    result = { "dup", holder, far_runat }
                end
            elseif j and is_live(j.st) then
                if not replace then
                    result = { "dup", holder, j.runat }
                elseif j.st == RESERVED then
                    result = { "conflict", holder }
                else
                    local from = j.st
                    unplace(holder, j)
                    if j.grp then GL.g_unhold(j, now) end -- (a fifo job waiting for a retry) it starts over
                    j.body, j.runat, j.prio, j.ttr, j.tries, j.bo = body, runat, prio, ttr, tries, bo
                    j.tp, j.ts, j.grp, j.ord = tp, ts, grp, nil
                    j.ver = j.ver + 1
                    place(holder, j, now)
                    save_job(holder, j)
                    local t = holder .. " " .. from .. " " .. j.st .. " " .. j.ver .. " " .. j.att .. " " .. j.runat ..
                        " " .. now .. " jobs"
                    local r = prio .. " " .. ttr .. " " .. tries .. " " .. (bo or -1)
                    local entry = { "t", t, "w", who, "r", r, "b", body }
                    if tp then
                        entry[#entry + 1], entry[#entry + 2] = "c", ts and (tp .. " " .. ts) or tp
                    end
                    if grp then entry[#entry + 1], entry[#entry + 2] = "g", grp end
                    redis.call("XADD", K_LOG, "*", unpack(entry))
                    if j.st == DELAYED then added_delayed[holder] = true end
                    result = { "replaced", holder, runat, j.ver, from, j.st }
                end
            end
            if not result and far then
                -- committed to MySQL alone (state 'far'); only its bizKey is kept here
                redis.call("HSET", biz_key(topic), biz, idkey .. "@" .. runat)
                result = { "far", idkey, runat, farheld or "" }
            elseif not result then
                local j = { ver = 1, att = 0, prio = prio, ttr = ttr, tries = tries, runat = runat,
                            topic = topic, biz = biz, body = body, bo = bo, tp = tp, ts = ts, grp = grp }
                place(idkey, j, now)
                save_job(idkey, j)
                redis.call("HSET", biz_key(topic), biz, idkey)
                if j.st == DELAYED then added_delayed[idkey] = true end
                pushed[topic] = (pushed[topic] or 0) + 1
                result = { "ok", idkey, runat, 1, j.st, farheld or "" }
            end
        end
        out[#out + 1] = result
    end

    for field, added in pairs(write_gathered()) do
        local topic = string.match(field, ":(.*)$") -- state names have no ':'
        pushed[topic] = (pushed[topic] or 0) + added
    end
    for topic, added in pairs(pushed) do tally(topic, "pushed", added) end
    if next(added_delayed) then wake_if_head_in(added_delayed) end
    publish_ready()
    at = at + 1 + n * 12
end
return out
