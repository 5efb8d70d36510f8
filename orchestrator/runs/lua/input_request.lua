-- input_request: a running call asks whoever drives the run for input (an MCP server's
-- elicitation, forwarded). The run waits (status awaiting) until an answer is posted or
-- the call gives up; the call keeps running on its worker, holding its session.
-- KEYS    meta, msgs, events (see prelude)
-- ARGV    InputRequest: step, call_id, request_id, request, event
-- Replies PARKED
--         UNKNOWN_RUN | CLOSED | STALE | UNKNOWN_CALL
--         WRONG_STATE {call_status}  the asking call is not running
--         DUPLICATE     the request was made before
-- Effects the request and its status pending, parked + 1, status awaiting, its event.
local refused, st = call_guard(A.step, A.call_id)
if refused then return refused end
local step = step_key(A.step)
if st ~= CALL.RUNNING then return reply(OUT.WRONG_STATE, {call_status = st}) end
if redis.call('HSETNX', step, S.INPUT .. A.request_id, A.request) == 0 then
  return reply(OUT.DUPLICATE)
end
redis.call('HSET', step, S.INPUT_STATUS .. A.request_id, INPUT.PENDING)
redis.call('HINCRBY', step, S.PARKED, 1)
redis.call('HSET', meta, F.STATUS, RUN.AWAITING)
emit(A.event)
return reply(OUT.PARKED)
