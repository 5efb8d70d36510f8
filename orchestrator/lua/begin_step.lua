-- A model step starts: check it is still the run's current step, announce it,
-- and hand back what the model needs, in one round trip.
local status = redis.call('HGET', meta, 'status')
if not status then return {'unknown-run'} end
if status ~= 'running' then return {'closed'} end
if tonumber(redis.call('HGET', meta, 'step')) ~= A.step then return {'stale'} end
if redis.call('HEXISTS', step_key(A.step), 'resp') == 1 then return {'duplicate'} end
emit(A.event)
local order = cjson.decode(redis.call('HGET', meta, 'tool_order') or '[]')
local tools = {}
if #order > 0 then tools = redis.call('HMGET', meta .. ':tools', unpack(order)) end
return {'ok', redis.call('HGET', meta, 'spec'), cjson.encode(tools),
        cjson.encode(redis.call('LRANGE', msgs, 0, -1))}
