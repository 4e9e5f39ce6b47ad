-- fardelete.lua — a far job's delete, after its row committed as deleted in MySQL.
-- The pager may have read the row just before the delete committed and be about to page the
-- job in, or have done so a moment ago: so a job found here is deleted as delete.lua does, and
-- one not found leaves a tombstone that restore.lua (the pager's insert) respects. Either way
-- its bizKey entry, far form or plain, is released.
-- KEYS[1] = <prefix>:{<shard>}:jobs
-- ARGV    = idkey, now, who, topic, bizKey ('' = none)
-- Returns {"ok", from_state, ver, attempts, runAt} (it was in Redis) | {"missing"} (tombstoned)
local idkey, now, who, topic, biz = ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[4], ARGV[5]
local j = load_job(idkey)
if j then
    local from = delete_job(idkey, j, now, who)
    return { "ok", from, j.ver, j.att, j.runat }
end
redis.call("ZADD", base .. "gone", now, idkey)
if biz ~= "" then
    local holder = biz_holder(topic, biz)
    if holder == idkey then redis.call("HDEL", biz_key(topic), biz) end
end
return { "missing" }
