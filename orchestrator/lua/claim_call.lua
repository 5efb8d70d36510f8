-- A tool job starts: the call must still want running. Returns the call and its tool.
local err = call_guard()
if err then return {err} end
local step = step_key(A.step)
if redis.call('HEXISTS', step, 'r:' .. A.call_id) == 1 then return {'done'} end
local st = redis.call('HGET', step, 'st:' .. A.call_id)
if st ~= 'queued' and st ~= 'running' then return {'not-runnable', tostring(st)} end
redis.call('HSET', step, 'st:' .. A.call_id, 'running')
local call = redis.call('HGET', step, 'c:' .. A.call_id)
local name = cjson.decode(call).name
local ev = cjson.decode(A.event)
ev.tool_name = name
emit(cjson.encode(ev))
return {'run', call, redis.call('HGET', meta .. ':tools', name) or ''}
