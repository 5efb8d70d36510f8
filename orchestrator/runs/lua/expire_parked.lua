-- expire_parked: a parked call's deadline passed (its deferred expiry job ran): the call
-- gets its error result, the model sees it, the run goes on. A no-op once resolved.
-- KEYS    meta, msgs, events (see prelude)
-- ARGV    ExpireParked (spilled: result, events): step, call_id, result, events, next_job
-- Replies RECORDED | CONTINUED | FINISHED | FAILED (on_error fail-run, as record_result)
--         UNKNOWN_RUN | CLOSED | STALE | UNKNOWN_CALL
--         WRONG_STATE {call_status}  the call is no longer parked (resolved in time)
-- Effects parked - 1, then as record_result.
local refused, st, call = call_guard(A.step, A.call_id)
if refused then return refused end
if not is_parked(st) then return reply(OUT.WRONG_STATE, {call_status = st}) end
unpark(A.step)
return reply(record(A.step, A.call_id, ARGV[A.result], spilled_all(A.events), A.next_job, call))
