-- restoreend.lua — the end of a restore on a shard (durable/restore.c, whether it completed or
-- not): lower the shard's "restoring" flag, and drop its tombstones ("gone") unless a pager's
-- page step is between its Redis write and its MySQL commit (the "paging" set, pager.c): a
-- re-page after a crash still needs them, and the pager prunes them later.
-- KEYS[1] = <prefix>:{<shard>}:jobs
-- ARGV    = (none)
-- Returns 0.
redis.call("DEL", base .. "restoring")
if redis.call("EXISTS", base .. "paging") == 0 then redis.call("DEL", base .. "gone") end
return 0
