-- unfence.lua — lift a shard's fence (mark.lua) after its fence check: only a fence set no
-- later than the check began, so a rollback seen again while the check ran keeps its fence
-- for the next check.
-- KEYS[1] = <prefix>:{<shard>}:jobs
-- ARGV    = started (unix ms: when the check began reading the shard)
-- Returns 1 when the fence was lifted, 0 when there was none or a newer one stays.
local at = redis.call("HGET", base .. "topic", K_FENCE_FIELD)
if at and tonumber(at) <= tonumber(ARGV[1]) then
    redis.call("HDEL", base .. "topic", K_FENCE_FIELD)
    return 1
end
return 0
