-- groups.lua — a page of a topic's groups with their counts (GET /topics/{topic}/groups), read
-- from the topic's group hash (lib.lua "Flow control by key"): only groups with something
-- delayed, ready or reserved have a field, so the walk never meets an idle one. The walk is
-- HSCAN's: a cursor that survives groups coming and going (a group there for the whole walk is
-- listed at least once), a page of about `limit` groups (a topic with few groups: all of them
-- at once), each page sorted by name.
-- KEYS[1] = <prefix>:{<shard>}:jobs   (the topic's shard)
-- ARGV    = topic, cursor ("0" = from the start), limit
-- Returns {next cursor ("0" when the walk is done), {group, delayed, ready, reserved}, ...}
local topic, cursor, limit = ARGV[1], ARGV[2], tonumber(ARGV[3])
local key = gs_key(topic)
local found = {}
for _ = 1, 20 do -- bounded: a sparse table may take a few steps to fill a page
    local r = redis.call("HSCAN", key, cursor, "COUNT", limit)
    cursor = r[1]
    for i = 1, #r[2], 2 do
        local _, res, del, rdy = string.match(r[2][i + 1], "^(%d+) (%d+) (%d+) (%d+)$")
        if res then found[#found + 1] = { r[2][i], tonumber(del), tonumber(rdy), tonumber(res) } end
    end
    if cursor == "0" or #found >= limit then break end
end
table.sort(found, function(a, b) return bytes_after(b[1], a[1]) end)
local out = { cursor }
for _, g in ipairs(found) do out[#out + 1] = g end
return out
