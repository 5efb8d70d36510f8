-- input_answer: the answer to an input request (accepted or declined), or the asking
-- call giving up on it (expired): settled once; an answer goes to the waiting call.
-- KEYS    meta, msgs, events (see prelude)
-- ARGV    InputAnswer: step, request_id, outcome, answer, answer_ttl_s, event
-- Replies ANSWERED
--         UNKNOWN_RUN | CLOSED | STALE
--         WRONG_STATE {call_status}  no pending request of that id (unknown or settled)
-- Effects the request's status, parked - 1, its event, the answer pushed onto the
--         request's answer list (kept answer_ttl_s).
local err = run_guard(A.step)
if err then return reply(err) end
local step = step_key(A.step)
local st = redis.call('HGET', step, S.INPUT_STATUS .. A.request_id)
if st ~= INPUT.PENDING then return reply(OUT.WRONG_STATE, {call_status = st or nil}) end
redis.call('HSET', step, S.INPUT_STATUS .. A.request_id, A.outcome)
unpark(A.step)
emit(A.event)
if A.answer then
  local key = meta .. K.ANSWER .. A.request_id
  redis.call('RPUSH', key, A.answer)
  redis.call('EXPIRE', key, A.answer_ttl_s)
end
return reply(OUT.ANSWERED)
