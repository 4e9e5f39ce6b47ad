-- restore.lua — insert jobs read back from MySQL, only where Redis lacks them.
-- Idempotent and safe beside live traffic: a job Redis holds is left alone, a job that
-- finished or was deleted while this restore ran (tombstone) is not brought back, and a
-- bizKey already held by another live job is not taken from it.
-- KEYS[1] = <prefix>:{<shard>}:jobs
-- ARGV    = now, n, then n groups of 9:
--           idkey, topic, body, runAt, priority, ttr, tries, bizKey, attempts, ver
--           (10 fields: ver is the MySQL row's version)
-- Returns one entry per job: {"restored", state, ver} | {"present", state} | {"gone"} | {"bizheld", idkey}
local now = tonumber(ARGV[1])
local n = tonumber(ARGV[2])
local out = {}
for i = 0, n - 1 do
    local a = 3 + i * 10
    local idkey, topic, body = ARGV[a], ARGV[a + 1], ARGV[a + 2]
    local existing = load_job(idkey)
    if existing then
        out[#out + 1] = { "present", existing.st }
    elseif redis.call("ZSCORE", base .. "gone", idkey) then
        out[#out + 1] = { "gone" }
    else
        local biz = ARGV[a + 7]
        local holder = (biz ~= "") and redis.call("HGET", biz_key(topic), biz)
        local hj = holder and load_job(holder)
        if hj and is_live(hj.st) then
            out[#out + 1] = { "bizheld", holder }
        else
            local j = { ver = tonumber(ARGV[a + 9]) + 1, att = tonumber(ARGV[a + 8]),
                        prio = tonumber(ARGV[a + 4]), ttr = tonumber(ARGV[a + 5]), tries = tonumber(ARGV[a + 6]),
                        runat = tonumber(ARGV[a + 3]), topic = topic, biz = biz, body = body }
            place(idkey, j, now)
            save_job(idkey, j)
            if biz ~= "" then redis.call("HSET", biz_key(topic), biz, idkey) end
            if j.st == DELAYED then wake_if_head(idkey) end
            out[#out + 1] = { "restored", j.st, j.ver }
        end
    end
end
publish_ready()
return out
