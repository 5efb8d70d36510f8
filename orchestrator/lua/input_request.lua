-- A running call asks whoever drives the run for input (an MCP server's elicitation,
-- forwarded): the run waits (status awaiting) until an answer is posted or the call
-- gives up. The call itself keeps running on its worker, holding its session.
local err = call_guard()
if err then return err end
local step = step_key(A.step)
if redis.call('HSETNX', step, 'in:' .. A.request_id, A.request) == 0 then return 'duplicate' end
redis.call('HSET', step, 'ins:' .. A.request_id, 'pending')
redis.call('HINCRBY', step, 'parked', 1)
redis.call('HSET', meta, 'status', 'awaiting')
emit(A.event)
return 'parked'
