-- A tool job's result (or error) comes in.
local err = call_guard()
if err then return err end
local st = redis.call('HGET', step_key(A.step), 'st:' .. A.call_id)
if not st then return 'unknown-call' end
return record(A.step, A.call_id)
