-- cancel: no further step is scheduled, and the current step's jobs are asked to abort.
-- KEYS    meta, msgs, events (see prelude)
-- ARGV    Cancel: reason, abort_key (the abort set of the run's partition), at_step_end
-- Replies CANCELLED {status}
--         STOPPING {status}  at_step_end on a running run: it ends when its step does (the
--                  join, or begin_step of a step not begun: see the prelude's stop_now)
--         CLOSED {status}  the run had ended (it stays as it ended)
--         UNKNOWN_RUN
-- Effects status cancelled, arq abort marks for the step's model job and call jobs, an
--         `abort` event, the run's keys expire, run-ended.
local status = redis.call('HGET', meta, F.STATUS)
if not status then return reply(OUT.UNKNOWN_RUN) end
if is_terminal(status) then return reply(OUT.CLOSED, {status = status}) end
if A.at_step_end and status == RUN.RUNNING then
  redis.call('HSET', meta, F.STOP_AT_STEP_END, A.reason or '')
  return reply(OUT.STOPPING, {status = status})
end
local n = tonumber(redis.call('HGET', meta, F.STEP))
local now_ms = math.floor(A.at * 1000)
redis.call('ZADD', A.abort_key, now_ms, job_prefix(n) .. K.MODEL_JOB)
local order = redis.call('HGET', step_key(n), S.ORDER)
if order then
  for _, id in ipairs(cjson.decode(order)) do
    redis.call('ZADD', A.abort_key, now_ms, job_prefix(n) .. K.CALL_JOB .. id)
  end
end
finish_run(RUN.CANCELLED, 'abort', {reason = A.reason})
return reply(OUT.CANCELLED, {status = RUN.CANCELLED})
