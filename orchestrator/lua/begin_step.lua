-- begin_step: a model step starts; announce it and hand back what the model needs.
-- KEYS    meta, msgs, events (see prelude)
-- ARGV    BeginStep: step, event
-- Replies OK {spec, tools, messages, parent}  (tool and message JSON strings, in order;
--            parent: a child run's parent call, for its progress)
--         UNKNOWN_RUN | CLOSED | STALE (not the current step)
--         DUPLICATE  the step was committed already (a re-delivered job)
-- Effects a `start-step` event (again on each delivery before the commit: the attempt).
local err = run_guard(A.step)
if err then return reply(err) end
if redis.call('HEXISTS', step_key(A.step), S.RESP) == 1 then return reply(OUT.DUPLICATE) end
emit(A.event)
local order = cjson.decode(redis.call('HGET', meta, F.TOOL_ORDER) or '[]')
local tools = {}
if #order > 0 then
  for _, tool in ipairs(redis.call('HMGET', tools_key(), unpack(order))) do
    if tool then tools[#tools + 1] = tool end
  end
end
return reply(OUT.OK, {spec = redis.call('HGET', meta, F.SPEC), tools = tools,
                      messages = redis.call('LRANGE', msgs, 0, -1),
                      parent = redis.call('HGET', meta, F.PARENT) or nil})
