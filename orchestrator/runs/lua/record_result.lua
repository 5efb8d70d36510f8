-- record_result: a tool job's result (or error) comes in; the last one joins.
-- KEYS    meta, msgs, events (see prelude)
-- ARGV    RecordResult (spilled: result, events): step, call_id, result, events, next_job
-- Replies RECORDED (others pending) | CONTINUED | FINISHED (this one joined)
--         FAILED        an error of a call whose tool says on_error fail-run
--         UNKNOWN_RUN | CLOSED | STALE | UNKNOWN_CALL
--         DUPLICATE     the call has its result (a re-delivered job)
--         WRONG_STATE {call_status}  the call is parked: only its resolution records it
-- Effects the result (write-once), call status done, its events, pending - 1; the join.
-- The step's plan is read with the call, for the join the last result makes, and so are
-- the call's result (recorded already: a duplicate) and the step's pending count: one read.
local refused, st, call, order, after, result, pending =
  call_guard(A.step, A.call_id, S.ORDER, S.AFTER, S.RESULT .. A.call_id, S.PENDING)
if refused then return refused end
if is_parked(st) then return reply(OUT.WRONG_STATE, {call_status = st}) end
if result then return reply(OUT.DUPLICATE) end
return reply(record(A.step, A.call_id, ARGV[A.result], spilled_all(A.events), A.next_job, call,
                    {order, after}, tonumber(pending)))
