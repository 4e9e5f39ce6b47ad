-- jobscan.lua — read a page of the jobs a shard holds, with their versions (no change).
-- flags: no-writes  (it only reads: it still runs while Redis is full)
-- The first step of a two-way restore: the daemon compares each with its MySQL row.
-- KEYS[1] = <prefix>:{<shard>}:jobs
-- ARGV    = cursor (HSCAN's; "0" to start), count (a hint, as HSCAN's COUNT)
-- Returns {next_cursor ("0" when done), {idkey, ver, state, ...}} — records that do not
-- decode are left out (move and reserve set them aside when they meet them).
local res = redis.call("HSCAN", K_JOBS, ARGV[1], "COUNT", tonumber(ARGV[2]))
local flat, out = res[2], {}
for i = 1, #flat, 2 do
    local ok, ver, st = pcall(cmsgpack.unpack, flat[i + 1])
    if ok and type(ver) == "number" and type(st) == "number" then
        out[#out + 1] = flat[i]
        out[#out + 1] = ver
        out[#out + 1] = st
    end
end
return { res[1], out }
