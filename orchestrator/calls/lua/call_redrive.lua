-- call_redrive: the sweeper found the call unmoved for a while and not done; enqueue its
-- job again unless it is queued or held (a failover dropped it, or it was lost). The
-- job id is fixed by the call, so a job that survived is not doubled.
-- KEYS    call, events (see call_prelude)
-- ARGV    RedriveCallJob: job (the call's job, as call_create made it; none when the
--         sweeper found no call)
-- Replies REDRIVEN {jobs}  the job enqueued again; the call is scored as moved now
--         IN_HAND          the job is queued or held; scored as moved now
--         UNKNOWN_CALL | DONE  the call is gone or has its result: it leaves the index
-- Effects the job enqueued again; the call's entry in its partition's moving index.
if not A.job or not redis.call('HGET', call, CF.STATUS) then
  redis.call('ZREM', moving_key, A.call_id)
  return reply(OUT.UNKNOWN_CALL)
end
if redis.call('HEXISTS', call, CF.RESULT) == 1 then
  redis.call('ZREM', moving_key, A.call_id)
  return reply(OUT.DONE)
end
moved()
if held(A.job.job_id) then return reply(OUT.IN_HAND) end
return reply(OUT.REDRIVEN, {jobs = enqueue(A.job)})
