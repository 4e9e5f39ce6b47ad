-- topicset.lua — write topics' settings into their shard's topic hash (lib.lua topic_conf), from
-- MySQL, which holds them (src/duties/topics.c). A value is "<paused> <rate> <backoff> <maxBackoff>
-- <seq>"; a write whose seq is not newer than the stored one is dropped, so writers racing
-- (a PUT and every instance's sync) always leave the newest. A topic whose paused flag goes
-- off is announced on "<prefix>:ready": consumers parked on it try again.
-- KEYS[1] = <prefix>:{<shard>}:jobs
-- ARGV    = synced (0, or the settings sequence this shard now holds every change up to),
--           topic1, value1, topic2, value2, ...
-- Returns the number of fields written.
local K_TOPIC = base .. "topic"
local written = 0
for a = 2, #ARGV, 2 do
    local topic, value = ARGV[a], ARGV[a + 1]
    local seq = tonumber(string.match(value, "(%d+)$"))
    local old = redis.call("HGET", K_TOPIC, topic)
    local old_seq = old and tonumber(string.match(old, "(%d+)$")) or -1
    if seq and seq > old_seq then
        redis.call("HSET", K_TOPIC, topic, value)
        written = written + 1
        if old and string.sub(old, 1, 1) == "1" and string.sub(value, 1, 1) == "0" then notify_ready(topic) end
    end
end
local synced = tonumber(ARGV[1])
if synced > 0 then
    local old = tonumber(redis.call("HGET", K_TOPIC, "~synced") or "0")
    if synced > old then redis.call("HSET", K_TOPIC, "~synced", synced) end
end
publish_ready()
return written
