-- lease.lua — the id generator's worker number: a lease per instance, and a high-water mark
-- per number so a new holder never issues an id the previous one could have issued.
-- KEYS[1] = <prefix>:{w}:workers   hash: worker number -> highest ms its ids may use
--           (lease keys "<prefix>:{w}:worker:<n>" share the {w} tag)
-- ARGV    = op, worker, token, ttl_ms, horizon_ms
--   op "acquire": take the lease if free; raise the mark to horizon. -> {1, previous_mark} | {0}
--   op "renew":   extend our lease; raise the mark to horizon.       -> {1, mark} | {0} (lost)
--   op "fixed":   a number set in config: take or keep its lease unless another instance
--                 holds it; raise the mark.                         -> {1, previous_mark} | {0, holder}
--   op "release": drop our lease.                                    -> {1}
local op, worker, token = ARGV[1], ARGV[2], ARGV[3]
local ttl, horizon = tonumber(ARGV[4]), tonumber(ARGV[5])
local lease_key = string.sub(KEYS[1], 1, -8) .. "worker:" .. worker
local function raise_mark()
    local mark = tonumber(redis.call("HGET", KEYS[1], worker) or "0")
    if horizon > mark then redis.call("HSET", KEYS[1], worker, horizon) end
    return mark
end
if op == "acquire" then
    if not redis.call("SET", lease_key, token, "NX", "PX", ttl) then return { 0 } end
    return { 1, raise_mark() }
elseif op == "renew" then
    if redis.call("GET", lease_key) ~= token then return { 0 } end
    redis.call("PEXPIRE", lease_key, ttl)
    raise_mark()
    return { 1, horizon }
elseif op == "fixed" then
    local holder = redis.call("GET", lease_key)
    if holder and holder ~= token then return { 0, holder } end
    redis.call("SET", lease_key, token, "PX", ttl)
    return { 1, raise_mark() }
elseif op == "release" then
    if redis.call("GET", lease_key) == token then redis.call("DEL", lease_key) end
    return { 1 }
end
return redis.error_reply("lease.lua: unknown op " .. tostring(op))
