-- redrive: the sweeper found the run unmoved for a while; enqueue again each job its
-- current step waits for that is neither queued nor held (a failover dropped it, or it
-- was lost). Job ids are fixed by what they do, so a job that survived is not doubled.
-- KEYS    meta, msgs, events (see prelude)
-- ARGV    Redrive: step, model_job, model_live (keys whose presence means the model step
--         is in hand: its summary or resumed job, its request parked with a provider
--         batch), calls[{id, job}] (the step's calls that run on a queue, with their jobs),
--         parked[{id, job}] (the jobs the run owns that end a parked call's wait: its
--         deadline, the start of its child run), watched (some parked call has such a
--         job), recheck_ms, ended (the run's parent, or its batch line, still waits on
--         this ended run)
-- Replies REDRIVEN {jobs}  jobs enqueued again; the run is scored as moved now
--         IN_HAND   every job the step waits for is queued or held; scored as moved now
--         PARKED    the step waits only on parked calls (approval, a client's result, a
--                   child run) and their own jobs are in hand: its wait is legitimate.
--                   Watched, it is scored recheck_ms later than a moving run (a lost
--                   deadline or child's end is found at that pace); else it leaves the
--                   moving index until what ends the wait moves the run again
--         UNKNOWN_RUN | CLOSED  the run is gone or ended: it leaves the moving index
--         STALE     the run moved on since the sweeper read it
-- Effects the jobs enqueued again; the run's entry in its partition's moving index.
local err = run_guard(A.step)
if err then
  if err ~= OUT.STALE then redis.call('ZREM', moving_key, A.run_id) end
  -- Its end enqueued its parent's answer job and its batch line's end job; enqueued
  -- again, they answer or settle nothing twice (each is idempotent by its id).
  local sent = 0
  if A.ended and err == OUT.CLOSED then
    for _, raw in ipairs(redis.call('HMGET', meta, F.PARENT_JOB, F.END_JOB)) do
      local job = raw and cjson.decode(raw)
      if job and not held(job.job_id) then sent = sent + enqueue(job) end
    end
  end
  if sent > 0 then return reply(OUT.REDRIVEN, {jobs = sent}) end
  return reply(err)
end
local step = step_key(A.step)

local sent = 0
if redis.call('HEXISTS', step, S.RESP) == 0 then
  -- The model step: its own job, or another that carries it on.
  local in_hand = held(A.model_job.job_id)
  if not in_hand and #A.model_live > 0 then
    in_hand = redis.call('EXISTS', unpack(A.model_live)) > 0
  end
  if not in_hand then sent = sent + enqueue(A.model_job) end
else
  local runnable = 0
  for _, id in ipairs(cjson.decode(redis.call('HGET', step, S.ORDER) or '[]')) do
    local st = redis.call('HGET', step, S.CALL_STATUS .. id)
    if st == CALL.QUEUED or st == CALL.RUNNING then runnable = runnable + 1 end
  end
  for _, c in ipairs(A.parked) do
    local st = redis.call('HGET', step, S.CALL_STATUS .. c.id)
    if is_parked(st) and not held(c.job.job_id) then sent = sent + enqueue(c.job) end
  end
  if runnable == 0 then
    if not A.watched then
      redis.call('ZREM', moving_key, A.run_id)
    else
      redis.call('ZADD', moving_key, now_ms() + A.recheck_ms, A.run_id)
    end
    unmoved()
    if sent > 0 then return reply(OUT.REDRIVEN, {jobs = sent}) end
    return reply(OUT.PARKED)
  end
  for _, c in ipairs(A.calls) do
    local st = redis.call('HGET', step, S.CALL_STATUS .. c.id)
    if (st == CALL.QUEUED or st == CALL.RUNNING) and not held(c.job.job_id) then
      sent = sent + enqueue(c.job)
    end
  end
end
moved(true)
if sent > 0 then return reply(OUT.REDRIVEN, {jobs = sent}) end
return reply(OUT.IN_HAND)
