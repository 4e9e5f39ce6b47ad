-- inspect.lua — read one job (no change).
-- flags: no-writes  (it only reads: it still runs while Redis is full)
-- KEYS[1] = <prefix>:{<shard>}:jobs
-- ARGV    = idkey
-- Returns {} when absent, else {state, ver, attempts, priority, ttr, tries, runAt, topic,
--          bizKey, body, leaseUntil (reserved only, else 0), backoff (the job's own, -1 = its
--          topic's)[, traceparent, tracestate (false: none)]} (lib.lua reply_trace)
local idkey = ARGV[1]
local j = load_job(idkey)
if not j then return {} end
local lease = 0
if j.st == RESERVED then lease = tonumber(redis.call("ZSCORE", K_DELAY, idkey)) or 0 end
return reply_trace({ j.st, j.ver, j.att, j.prio, j.ttr, j.tries, j.runat, j.topic, j.biz, j.body, lease, j.bo or -1 }, j)
