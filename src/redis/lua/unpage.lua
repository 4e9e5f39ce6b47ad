-- unpage.lua — take back jobs the pager put in Redis from rows that changed in MySQL before
-- the pager could mark them paged (a delete or a reschedule committed between the pager's read
-- and its own commit). Each goes only if Redis still holds the version the pager wrote: a job
-- that moved on since (reserved, say) is left to its newer state. Nothing is logged: MySQL
-- already says what became of the row. A job whose row is still far (rescheduled) keeps its
-- bizKey in the far form, with its new due time.
-- KEYS[1] = <prefix>:{<shard>}:jobs
-- ARGV    = n, then n groups of 3: idkey, version (as the pager wrote it), runAt ('' = the row is
--           no longer far: the bizKey entry goes)
-- Returns the number of jobs taken back.
local n = tonumber(ARGV[1])
local taken = 0
for i = 0, n - 1 do
    local idkey, ver, runat = ARGV[2 + i * 3], tonumber(ARGV[3 + i * 3]), ARGV[4 + i * 3]
    local j = load_job(idkey)
    if j and j.ver == ver and (j.st == DELAYED or j.st == READY) then
        unplace(idkey, j)
        redis.call("HDEL", K_JOBS, idkey)
        if j.biz ~= "" and biz_holder(j.topic, j.biz) == idkey then
            if runat ~= "" then
                redis.call("HSET", biz_key(j.topic), j.biz, idkey .. "@" .. runat)
            else
                redis.call("HDEL", biz_key(j.topic), j.biz)
            end
        end
        taken = taken + 1
    end
end
return taken
