-- release.lua — give a reserved job back (nack): due again after `delay` ms (0 = ready now;
-- -1 = after its backoff, lib.lua backoff_delay). The delivery counts toward `tries`. `mode`:
--   0  a consumer's release (the default);
--   1  a delivery route's failed attempt (webhook, amqp): a job that had its `tries`
--      deliveries is dead, as when a lease runs out;
--   2  a delivery that never reached anyone (the broker was down): it does not count.
-- KEYS[1] = <prefix>:{<shard>}:jobs
-- ARGV    = idkey, now, delay, attempt (0 = any), who, mode, key (the transition's actor key)
-- A grouped job gives its group's slot back (lib.lua place), except under fifo while it waits
-- for its next attempt: its group's next job waits for it.
-- Returns {"ok", state, runAt, ver, attempts} | {"missing"} | {"state", state} | {"stale", attempts}
local idkey, now, delay, attempt, who = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), ARGV[5]
local mode, key = ARGV[6] or "0", ARGV[7] or "jobs"
local j = load_job(idkey)
if not j then return { "missing" } end
if j.st ~= RESERVED then return { "state", j.st } end
if attempt ~= 0 and attempt ~= j.att then return { "stale", j.att } end
unplace(idkey, j)
j.ver = j.ver + 1
if mode == "2" and j.att > 0 then j.att = j.att - 1 end
if mode == "1" and j.att >= j.tries then
    j.st = DEAD
    redis.call("ZADD", dead_key(j.topic), now, idkey)
    biz_release(idkey, j)
    count(DEAD, j.topic, 1)
    if j.grp then GL.g_unhold(j, now) end
else
    if delay < 0 then delay = backoff_delay(j, topic_conf(j.topic)) end
    j.runat = now + delay
    place(idkey, j, now)
end
save_job(idkey, j)
log_transition(idkey, RESERVED, j.st, j, now, key, who)
if j.st == DELAYED then wake_if_head(idkey) end
publish_ready()
return { "ok", j.st, j.runat, j.ver, j.att }
