-- goneexpire.lua — tombstones leave a shard's "gone" set once no page step can need them
-- (the pager calls it every PRUNE_EVERY_MS with now - TOMBSTONE_KEEP_MS, pager.c), unless a
-- restore runs: it reads them, and drops them all when it ends (restore.c).
-- KEYS[1] = <prefix>:{<shard>}:jobs
-- ARGV    = cutoff (unix ms: tombstones scored at or before it go)
-- Returns the number of tombstones removed (0 while a restore runs).
if redis.call("EXISTS", base .. "restoring") == 0 then
    return redis.call("ZREMRANGEBYSCORE", base .. "gone", "-inf", ARGV[1])
end
return 0
