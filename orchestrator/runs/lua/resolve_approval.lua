-- resolve_approval: a human approved or denied a parked call. A denial is a tool error
-- the model sees (recorded like a result).
-- KEYS    meta, msgs, events (see prelude)
-- ARGV    ResolveApproval: step, call_id, approved, event,
--         approved: next_status, job (when it runs on a queue, or a job starts its work:
--         a sub-agent's child run, a workflow's nodes), call (its record with an edited
--         input, when the approver edited it);
--         denied: result, events, next_job
-- Replies APPROVED | RECORDED | CONTINUED | FINISHED | FAILED (a denial recorded; FAILED:
--         on_error fail-run, as record_result)
--         UNKNOWN_RUN | CLOSED | STALE | UNKNOWN_CALL
--         WRONG_STATE {call_status}  the call does not await approval (e.g. resolved twice)
-- Effects a `tool-approval-response` event; approved: the call's record (edited), its next
--         status, its job,
--         parked - 1 if it runs now (a client tool stays parked, awaiting its result);
--         denied: parked - 1, then as record_result.
local refused, st, call = call_guard(A.step, A.call_id)
if refused then return refused end
local step = step_key(A.step)
if st ~= CALL.AWAITING_APPROVAL then return reply(OUT.WRONG_STATE, {call_status = st}) end
emit(A.event)
if A.approved then
  if A.call then redis.call('HSET', step, S.CALL .. A.call_id, A.call) end
  redis.call('HSET', step, S.CALL_STATUS .. A.call_id, A.next_status)
  if A.job then enqueue(A.job) end
  if A.next_status == CALL.QUEUED then unpark(A.step) end
  return reply(OUT.APPROVED)
end
unpark(A.step)
return reply(record(A.step, A.call_id, A.result, A.events, A.next_job, call))
