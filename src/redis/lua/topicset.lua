-- topicset.lua — write topics' settings into their shard's topic hash (lib.lua topic_conf), from
-- MySQL, which holds them (src/duties/topics.c). A value is "<paused> <rate> <backoff> <maxBackoff>
-- <seq>"; a write whose seq is not newer than the stored one is dropped, so writers racing
-- (a PUT and every instance's sync) always leave the newest. A topic whose paused flag goes
-- off is announced on "<prefix>:ready": consumers parked on it try again.
-- Group settings (lib.lua "Flow control by key"): a topic whose settings go while its groups
-- still have ready jobs on their ranges ("gr:") keeps " g0 0 0 " in its value — no limits, but
-- reserve.lua serves those ranges until they are empty and then drops the mark itself. When a
-- topic's group settings change or go, every group waiting on one of its lists (the round, rate
-- waits) goes back on the round, to be looked at again under the new settings (lib.lua
-- GL.g_relist). A topic that gains settings finds its grouped ready jobs on its ready zset, and
-- reserve.lua moves them to their groups as it meets them.
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
        local old_groups = old and string.match(old, " (g%d+ %d %d+) ")
        local new_groups = string.match(value, " (g%d+ %d %d+) ")
        if old_groups and not new_groups then
            local draining = redis.call("EXISTS", GL.gready_key(topic)) == 1
            if draining then value = string.gsub(value, " (%d+)$", " g0 0 0 %1", 1) end
            GL.g_relist(topic, draining)
        elseif old_groups and new_groups ~= old_groups then
            GL.g_relist(topic, true)
        end
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
