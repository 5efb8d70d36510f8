-- Create a run once (a second submit of the same id is a no-op) and schedule step 0.
if redis.call('EXISTS', meta) == 1 then return 0 end
redis.call('HSET', meta, 'spec', A.spec, 'status', 'running', 'step', 0, 'seq', 0,
           'created_at', A.at, 'n_initial', #A.messages, 'trace', A.trace,
           'u_in', 0, 'u_out', 0, 'u_total', 0, 'u_cached', 0, 'u_reason', 0)
-- Tools are offered to the model in the spec's order (stable prompts cache better).
for _, name in ipairs(A.tool_order) do
  redis.call('HSET', meta .. ':tools', name, A.tools[name])
end
redis.call('HSET', meta, 'tool_order', cjson.encode(A.tool_order))
for _, m in ipairs(A.messages) do redis.call('RPUSH', msgs, m) end
emit(A.event)
enqueue(A.next_job)
return 1
