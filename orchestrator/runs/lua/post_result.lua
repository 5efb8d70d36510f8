-- post_result: the result of a call awaiting one (a client tool) is posted from outside.
-- KEYS    meta, msgs, events (see prelude)
-- ARGV    PostResult (spilled: result, events): step, call_id, result, events, next_job, child_usage (a sub-agent's)
-- Replies RECORDED | CONTINUED | FINISHED | FAILED (on_error fail-run, as record_result)
--         UNKNOWN_RUN | CLOSED | STALE | UNKNOWN_CALL
--         WRONG_STATE {call_status}  the call does not await a result (e.g. posted twice)
-- Effects parked - 1 (status running when none is left), the child's usage added to the
--         children's totals, then as record_result.
local refused, st, call = call_guard(A.step, A.call_id)
if refused then return refused end
if st ~= CALL.AWAITING_RESULT then return reply(OUT.WRONG_STATE, {call_status = st}) end
unpark(A.step)
if A.child_usage then add_usage(meta, A.child_usage, CHILD_USAGE, CHILD_COST, F.CHILD_UNPRICED) end
return reply(record(A.step, A.call_id, ARGV[A.result], spilled_all(A.events), A.next_job, call))
