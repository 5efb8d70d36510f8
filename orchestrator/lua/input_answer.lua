-- The answer to an input request (accepted or declined), or the asking call giving
-- up on it: settled once; an accepted or declined answer is handed to the waiting call.
local err = call_guard()
if err then return err end
local step = step_key(A.step)
if redis.call('HGET', step, 'ins:' .. A.request_id) ~= 'pending' then return 'wrong-state' end
redis.call('HSET', step, 'ins:' .. A.request_id, A.outcome)
unpark(A.step)
emit(A.event)
if A.answer then
  local key = meta .. ':answer:' .. A.request_id
  redis.call('RPUSH', key, A.answer)
  redis.call('EXPIRE', key, 3600)
end
return 'answered'
