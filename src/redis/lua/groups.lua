-- groups.lua — a page of a topic's groups with their counts (GET /topics/{topic}/groups), from
-- flags: no-writes  (it only reads: it still runs while Redis is full)
-- the two places a group with jobs shows (lib.lua "Flow control by key"): the topic's group
-- hash ("gs:": every group with something delayed or reserved, or ready on the topic's ready
-- zset, or waiting its turn), walked first with HSCAN, then its groups' ranges ("gr:"), group
-- after group by ZRANGEBYLEX, each group not already met in the hash. A group with nothing has
-- neither (or a field that says so, for a moment), so the walk lists no idle one. Positions:
-- "h<HSCAN cursor>" in the hash (a group there for the whole walk is listed at least once;
-- "h<cursor>:<group>" when the page ended inside the batch
-- HSCAN answered at that cursor — a small hash answers all of its fields at once —, after that
-- group of it), "r<group>" on the ranges (after that group); a group that changes place during
-- the walk may be listed twice or not at all. A page holds at most `limit` groups, each sorted by
-- name.
-- KEYS[1] = <prefix>:{<shard>}:jobs   (the topic's shard)
-- ARGV    = topic, position ('' = from the start), limit
-- Returns {next position ('' when the walk is done), {group, delayed, ready, reserved}, ...}
local topic, pos, limit = ARGV[1], ARGV[2], tonumber(ARGV[3])
local hkey, gr = GL.gs_key(topic), GL.gready_key(topic)
local function on_range(g)
    return redis.call("ZLEXCOUNT", gr, "[" .. g .. "\0", "(" .. g .. "\1")
end
local found, next_pos = {}, ""
if pos == "" or string.sub(pos, 1, 1) == "h" then
    local cursor, after = "0", nil
    if pos ~= "" then
        local c, a = string.match(pos, "^h(%d+):(.*)$")
        if c then cursor, after = c, a else cursor = string.sub(pos, 2) end
    end
    for _ = 1, 20 do -- bounded: a sparse table may take a few steps to fill a page
        local r = redis.call("HSCAN", hkey, cursor, "COUNT", limit)
        -- the batch's groups with something, by name, after the last one already listed from it
        local batch = {}
        for i = 1, #r[2], 2 do
            local g = r[2][i]
            local _, res, del, rdy = string.match(r[2][i + 1], "^(%d+) (%d+) (%d+) (%d+)")
            if res and (not after or bytes_after(g, after)) then
                local ready = tonumber(rdy) + on_range(g)
                -- (a field may stay a moment for a group with nothing: lib.lua GL says when)
                if res + del + ready > 0 then batch[#batch + 1] = { g, tonumber(del), ready, tonumber(res) } end
            end
        end
        table.sort(batch, function(a, b) return bytes_after(b[1], a[1]) end)
        local room = limit - #found
        if #batch > room then
            -- a batch bigger than the page (a small hash answers all of its fields at once): the
            -- page ends inside it, and the next one starts again from this batch, after its last
            for i = 1, room do found[#found + 1] = batch[i] end
            next_pos = "h" .. cursor .. ":" .. found[#found][1]
            break
        end
        for _, g in ipairs(batch) do found[#found + 1] = g end
        after = nil
        cursor = r[1]
        next_pos = cursor == "0" and "r" or ("h" .. cursor)
        if cursor == "0" or #found >= limit then break end
    end
else
    local last = string.sub(pos, 2)
    local from = last == "" and "-" or ("[" .. last .. "\1")
    while #found < limit do
        local m = redis.call("ZRANGEBYLEX", gr, from, "+", "LIMIT", 0, 1)[1]
        if not m then
            last = nil
            break
        end
        local g = string.match(m, "^(.-)%z")
        last = g
        from = "[" .. g .. "\1"
        if redis.call("HEXISTS", hkey, g) == 0 then found[#found + 1] = { g, 0, on_range(g), 0 } end
    end
    next_pos = last and ("r" .. last) or ""
end
if next_pos == "r" and redis.call("EXISTS", gr) == 0 then next_pos = "" end
table.sort(found, function(a, b) return bytes_after(b[1], a[1]) end)
local out = { next_pos }
for _, g in ipairs(found) do out[#out + 1] = g end
return out
