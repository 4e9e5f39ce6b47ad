-- layout.lua — claim or read the data layout record (src/redis/layout.h).
-- KEYS[1] = <prefix>:{w}:meta   hash: shards -> the shard count; tags -> how shard keys are
--           tagged, "plain" ({3}) or "cluster" ({3.2520}) (src/core/shardtag.h). A record written
--           before the tags field existed has none, and means plain.
-- ARGV    = shards, tags: this instance's
-- The first instance to find no record writes both fields in this one step, so no other can
-- see a count without its scheme; a record that is there is never changed.
-- Returns {shards, tags}: the record's.
local meta = KEYS[1]
if redis.call("HSETNX", meta, "shards", ARGV[1]) == 1 then
    redis.call("HSET", meta, "tags", ARGV[2])
end
local rec = redis.call("HMGET", meta, "shards", "tags")
return { rec[1], rec[2] or "plain" }
