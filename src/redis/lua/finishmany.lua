-- finishmany.lua — finish.lua for several reserved jobs of one shard in one call: the finishes
-- that reach a worker in one pass of its loop (src/api/passmerge.h). A script call costs more
-- than a finish's own commands, and its fixed part (the call, the tombstone flags' look) is paid
-- once here.
-- KEYS[1] = <prefix>:{<shard>}:jobs
-- ARGV    = now, who, idkey1, attempt1, idkey2, attempt2, ... (attempt as finish.lua's)
-- Returns one entry per job, in order, each what finish.lua returns.
local now, who = tonumber(ARGV[1]), ARGV[2]
local out = {}
for i = 3, #ARGV - 1, 2 do
    out[#out + 1] = finish_job(ARGV[i], now, tonumber(ARGV[i + 1]), who, "jobs")
end
publish_ready()
return out
