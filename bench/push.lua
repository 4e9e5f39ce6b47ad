-- push.lua — wrk script for figures 0, 1 and 4: single-job durable pushes.
--
-- Every request is POST /push with one job whose body is a 100-byte JSON value (a string of
-- 98 characters plus its quotes), due in one hour, so jobs pile up in the delay zsets and
-- no mover or consumer work mixes into the measurement. Requests rotate over 16 topics
-- (bench.0 … bench.15), which hash onto all 8 shards. The same requests go to bench/hello.c.
--
-- Environment: HG_TOPICS (default 16), HG_DELAY ms (default 3600000).
local ntopics = tonumber(os.getenv("HG_TOPICS") or "16")
local delay = tonumber(os.getenv("HG_DELAY") or "3600000")
local body = '"' .. string.rep("x", 98) .. '"'
local requests = {}
local i = 0

function init(args)
    for t = 0, ntopics - 1 do
        local job = string.format('{"topic":"bench.%d","body":%s,"delay":%d}', t, body, delay)
        requests[t + 1] = wrk.format("POST", "/push", { ["Content-Type"] = "application/json" }, job)
    end
end

function request()
    i = i + 1
    return requests[(i % ntopics) + 1]
end

-- Non-2xx answers are counted by wrk ("Non-2xx or 3xx responses"); run.sh fails the figure
-- when there are any.
