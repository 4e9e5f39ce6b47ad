-- guard.lua — put before lib.lua and the script in cluster mode (scripts/embed-lua.sh; the
-- guarded texts are used when the shard tags are cluster tags, scripts.h), never run alone.
-- While a script's slot migrates, Redis checks its undeclared keys only when the script
-- reaches them: one that moved fails the script there, after its earlier writes stayed
-- (docs/architecture.md, "Scripts while their slot migrates"). This line makes every script
-- fail at once instead, before it reads or writes anything: EXISTS of KEYS[1] and of a key of
-- the same slot that never exists is refused ("non local key") exactly when the slot is
-- migrating away from this node or being imported into it, and answers 0 or 1 otherwise.
-- rcluster.c retries that refusal like TRYAGAIN, within the command's timeout.
redis.call("EXISTS", KEYS[1], KEYS[1] .. "~guard")
