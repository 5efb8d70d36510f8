-- A human approved or denied a parked call. A denial is a tool error the model sees.
local err = call_guard()
if err then return {err} end
local step = step_key(A.step)
local st = redis.call('HGET', step, 'st:' .. A.call_id)
if st ~= 'awaiting-approval' then return {'wrong-state', tostring(st)} end
emit(A.event)
if A.approved then
  redis.call('HSET', step, 'st:' .. A.call_id, A.next_status)
  if A.next_status == 'queued' then
    enqueue(A.job)
    unpark(A.step)
  end
  return {'approved'}
end
unpark(A.step)
return {record(A.step, A.call_id)}
