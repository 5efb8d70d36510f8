-- workflow_record: one node of a workflow call has its outcome; enqueue the nodes it made
-- ready, and answer the call when the workflow is over.
-- KEYS    meta, msgs, events (see prelude)
-- ARGV    WorkflowRecord: step, call_id, node, outcome, events, candidates, final
--         candidates: {job, needs}: a successor's job, due once every node in `needs`
--         has an outcome; final (the output node's value, or a failed node's error):
--         the call's result, with result events and next_job as record_result, and
--         usage (its llm nodes'), added to the run's children's usage.
-- Replies RECORDED    the outcome is written (or was: DUPLICATE); ready successors queued
--         CONTINUED | FINISHED | FAILED  with `final`: the call is answered, as record_result
--         DUPLICATE   the outcome was written before (a re-delivered job): its
--                     successors are queued again (a no-op when they were)
--         UNKNOWN_RUN | CLOSED | STALE | UNKNOWN_CALL
--         WRONG_STATE {call_status}  the call was answered (another node failed first)
-- Effects the node's outcome in the call's workflow hash (write-once, kept for the run's
--         retention), its events, the ready successors' jobs; with `final`: parked - 1
--         and the call's result (the join as record_result).
local refused, st, call = call_guard(A.step, A.call_id)
if refused then return refused end
if st ~= CALL.AWAITING_RESULT then return reply(OUT.WRONG_STATE, {call_status = st}) end
local wf = meta .. K.WORKFLOW .. A.step .. K.WORKFLOW_SEPARATOR .. A.call_id
local fresh = redis.call('HSETNX', wf, A.node, A.outcome) == 1
if fresh then
  emit_all(A.events)
  redis.call('EXPIRE', wf, A.retention_s)
end
for _, c in ipairs(A.candidates or {}) do
  local ready = true
  for _, need in ipairs(c.needs) do
    if redis.call('HEXISTS', wf, need) == 0 then ready = false end
  end
  if ready then enqueue(c.job) end
end
if A.final and fresh then
  unpark(A.step)
  if A.final.usage then add_usage(meta, A.final.usage, CHILD_USAGE, CHILD_COST, F.CHILD_UNPRICED) end
  return reply(record(A.step, A.call_id, A.final.result, A.final.events, A.final.next_job,
                      call))
end
return reply(fresh and OUT.RECORDED or OUT.DUPLICATE)
