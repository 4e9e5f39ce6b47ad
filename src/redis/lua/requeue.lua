-- requeue.lua — give a dead job a fresh start: ready now, attempts back to 0.
-- KEYS[1] = <prefix>:{<shard>}:jobs
-- ARGV    = idkey, now, who
-- Returns {"ok", ver} | {"missing"} | {"state", state} | {"bizheld", idkey}
local idkey, now, who = ARGV[1], tonumber(ARGV[2]), ARGV[3]
local j = load_job(idkey)
if not j then return { "missing" } end
if j.st ~= DEAD then return { "state", j.st } end
if j.biz ~= "" then
    local holder, far_runat = biz_holder(j.topic, j.biz)
    if far_runat and holder ~= idkey then return { "bizheld", holder } end -- a far job holds it
    local hj = holder and holder ~= idkey and load_job(holder)
    if hj and is_live(hj.st) then return { "bizheld", holder } end
    redis.call("HSET", biz_key(j.topic), j.biz, idkey)
end
unplace(idkey, j)
j.att = 0
j.runat = now
j.ver = j.ver + 1
place(idkey, j, now)
save_job(idkey, j)
log_transition(idkey, DEAD, READY, j, now, "jobs", who)
publish_ready()
return { "ok", j.ver }
