-- A result for a call that has no executor here (a client tool) is posted from outside.
local err = call_guard()
if err then return {err} end
local st = redis.call('HGET', step_key(A.step), 'st:' .. A.call_id)
if st ~= 'awaiting-result' then return {'wrong-state', tostring(st)} end
unpark(A.step)
return {record(A.step, A.call_id)}
