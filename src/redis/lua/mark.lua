-- mark.lua — loss detection: this instance's mark in the shard, compared and advanced in one step.
-- Each instance writes a mark that only grows into its field of base.."marks"; Redis that
-- comes back with older data (a snapshot, a replica promoted after losing writes) or none at
-- all holds an older mark than the one written last, or none. A restore that completes
-- writes "restored" = its end time into the same hash, so every instance can tell that the
-- loss it saw has been repaired.
-- KEYS[1] = <prefix>:{<shard>}:jobs
-- ARGV    = instance, expected (the mark this process wrote last; "" when none yet), next
-- Returns {verdict, restored} with verdict "ok" | "behind" (an older mark) | "missing" (none),
--         restored = when a restore last completed on this shard (0 when never)
local K = base .. "marks"
local have, expected = redis.call("HGET", K, ARGV[1]), ARGV[2]
local verdict = "ok"
if expected ~= "" then
    if not have then
        verdict = "missing"
    elseif tonumber(have) < tonumber(expected) then
        verdict = "behind"
    end
end
redis.call("HSET", K, ARGV[1], ARGV[3])
return { verdict, tonumber(redis.call("HGET", K, "restored") or "0") }
