-- farbiz.lua — /reStore after a Redis loss: put back the bizKeys of far jobs (MySQL alone holds
-- them, so restore.lua never sees them), from MySQL's far_biz table. A key held meanwhile by a
-- live job in Redis is left to it (as restore.lua does).
-- KEYS[1] = <prefix>:{<shard>}:jobs
-- ARGV    = n, then n groups of 4: idkey, topic, bizKey, runAt
-- Returns the number of keys put back.
local n = tonumber(ARGV[1])
local put = 0
for i = 0, n - 1 do
    local a = 2 + i * 4
    local idkey, topic, biz, runat = ARGV[a], ARGV[a + 1], ARGV[a + 2], ARGV[a + 3]
    local holder, far_runat = biz_holder(topic, biz)
    local hj = holder and not far_runat and load_job(holder)
    if not holder or (holder ~= idkey and not far_runat and not (hj and is_live(hj.st))) then
        redis.call("HSET", biz_key(topic), biz, idkey .. "@" .. runat)
        put = put + 1
    end
end
return put
