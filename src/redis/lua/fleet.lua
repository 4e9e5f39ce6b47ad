-- fleet.lua — the instance registry: a heartbeat in, the live instances out.
-- KEYS[1] = <prefix>:{w}:instances   zset: instance -> last heartbeat ms
--           (stats keys "<prefix>:{w}:instance:<name>" share the {w} tag)
-- ARGV    = op ("beat" | "leave"), now, instance, stats JSON, live_ms
--   beat:  record the heartbeat and this instance's stats (kept 3 x live_ms); forget
--          instances silent for a minute. Returns the live instances (heartbeat within live_ms),
--          sorted, each followed by its stats JSON (or "").
--   leave: remove this instance now, so the others take its shards at once. Returns {}.
local op, now, me = ARGV[1], tonumber(ARGV[2]), ARGV[3]
local stats, live_ms = ARGV[4], tonumber(ARGV[5])
local stats_prefix = string.sub(KEYS[1], 1, -10) .. "instance:"   -- strip "instances"
if op == "leave" then
    redis.call("ZREM", KEYS[1], me)
    redis.call("DEL", stats_prefix .. me)
    return {}
end
redis.call("ZADD", KEYS[1], now, me)
redis.call("SET", stats_prefix .. me, stats, "PX", live_ms * 3)
redis.call("ZREMRANGEBYSCORE", KEYS[1], "-inf", now - 60000)
local live = redis.call("ZRANGEBYSCORE", KEYS[1], now - live_ms, "+inf")
table.sort(live)
local out = {}
for _, name in ipairs(live) do
    out[#out + 1] = name
    out[#out + 1] = redis.call("GET", stats_prefix .. name) or ""
end
return out
