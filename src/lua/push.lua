-- push.lua — add jobs to one shard, honouring bizKey dedupe and replace atomically.
-- KEYS[1] = <prefix>:{<shard>}:jobs
-- ARGV    = n, then n groups of 11 (the jobs of one or several requests, in commit order):
--           idkey, topic, body, runAt, priority, ttr, tries, bizKey ('' = none), replace (0/1),
--           now (the request's clock: due at or before it, the job starts ready, as its
--           committed row says), who (the request's actor, for the outbox)
-- Returns one entry per job, in order:
--   {"ok", idkey, runAt, ver, state}             added
--   {"dup", idkey_existing, runAt}               a live job holds (topic, bizKey); nothing changed
--   {"replaced", idkey_existing, runAt, ver, from_state, state}  that delayed/ready job now has
--                                                this push's body, runAt, priority, ttr and tries
--   {"conflict", idkey_existing}                 replace asked, but the holder is reserved
-- A new job is not logged: its creation is the message row the caller committed first.
local n = tonumber(ARGV[1])
local out = {}
for i = 0, n - 1 do
    local a = 2 + i * 11
    local idkey, topic, body = ARGV[a], ARGV[a + 1], ARGV[a + 2]
    local runat, prio, ttr, tries = tonumber(ARGV[a + 3]), tonumber(ARGV[a + 4]), tonumber(ARGV[a + 5]), tonumber(ARGV[a + 6])
    local biz, replace = ARGV[a + 7], ARGV[a + 8] == "1"
    local now, who = tonumber(ARGV[a + 9]), ARGV[a + 10]
    local result = nil

    if biz ~= "" then
        local holder = redis.call("HGET", biz_key(topic), biz)
        local j = holder and load_job(holder)
        if j and is_live(j.st) then
            if not replace then
                result = { "dup", holder, j.runat }
            elseif j.st == RESERVED then
                result = { "conflict", holder }
            else
                local from = j.st
                unplace(holder, j)
                j.body, j.runat, j.prio, j.ttr, j.tries = body, runat, prio, ttr, tries
                j.ver = j.ver + 1
                place(holder, j, now)
                save_job(holder, j)
                redis.call("XADD", K_LOG, "*", "t",
                    holder .. " " .. from .. " " .. j.st .. " " .. j.ver .. " " .. j.att .. " " .. j.runat .. " " .. now .. " jobs",
                    "w", who, "r", prio .. " " .. ttr .. " " .. tries, "b", body)
                if j.st == DELAYED then wake_if_head(holder) end
                result = { "replaced", holder, runat, j.ver, from, j.st }
            end
        end
    end

    if not result then
        local j = { ver = 1, att = 0, prio = prio, ttr = ttr, tries = tries, runat = runat,
                    topic = topic, biz = biz, body = body }
        place(idkey, j, now)
        save_job(idkey, j)
        if biz ~= "" then redis.call("HSET", biz_key(topic), biz, idkey) end
        if j.st == DELAYED then wake_if_head(idkey) end
        result = { "ok", idkey, runat, 1, j.st }
    end
    out[#out + 1] = result
end
publish_ready()
return out
