-- mark.lua — loss detection: this instance's mark in the shard, compared and advanced in one step.
-- Each instance writes a mark that only grows into its field of base.."marks"; Redis that
-- comes back with older data (a snapshot, a replica promoted after losing writes) or none at
-- all holds an older mark than the one written last, or none. A restore that completes
-- writes "restored" = its end time into the same hash, so every instance can tell that the
-- loss it saw has been repaired.
-- A rollback also fences the shard (field "~fenced" of base.."topic" = when it was first seen,
-- lib.lua fenced()): move.lua and
-- reserve.lua change nothing on a fenced shard until its fence check (durable/restore.h,
-- restore_fence_check) has let MySQL's newer states win and lifted it (unfence.lua). Without
-- it a job deleted after the snapshot came due and was delivered before any restore ran, and
-- the move that made it ready gave it the version MySQL holds for the delete.
-- KEYS[1] = <prefix>:{<shard>}:jobs
-- ARGV    = instance, expected (the mark this process wrote last; "" when none yet), next
--           (unix ms: marks are times, so `next` also dates a fence)
-- Returns {verdict, restored, fenced}: verdict "ok" | "behind" (an older mark) | "missing"
--         (none), restored = when a restore last completed on this shard (0 when never),
--         fenced = when the shard was fenced (0 when it is not)
local K = base .. "marks"
local have, expected = redis.call("HGET", K, ARGV[1]), ARGV[2]
local verdict = "ok"
if expected ~= "" then
    if not have then
        verdict = "missing"
    elseif tonumber(have) < tonumber(expected) then
        verdict = "behind"
        redis.call("HSETNX", base .. "topic", K_FENCE_FIELD, ARGV[3])
    end
end
-- never lowered: a call that reaches Redis late (queued on a connection given up on during a
-- partition) must not set the mark back and make the next call see a rollback
if not have or tonumber(ARGV[3]) > tonumber(have) then redis.call("HSET", K, ARGV[1], ARGV[3]) end
return { verdict, tonumber(redis.call("HGET", K, "restored") or "0"),
         tonumber(redis.call("HGET", base .. "topic", K_FENCE_FIELD) or "0") }
