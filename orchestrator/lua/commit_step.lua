-- Record a model step's answer and apply its plan: park, answer or enqueue each call.
local status = redis.call('HGET', meta, 'status')
if status ~= 'running' then return 'closed' end
if tonumber(redis.call('HGET', meta, 'step')) ~= A.step then return 'stale' end
local step = step_key(A.step)
if redis.call('HSETNX', step, 'resp', A.resp) == 0 then return 'duplicate' end
redis.call('HSET', step, 'text', A.text, 'finish_reason', A.finish_reason, 'after', A.after,
           'order', A.order, 'pending', A.pending, 'parked', A.parked)
redis.call('HINCRBY', meta, 'u_in', A.usage.input_tokens)
redis.call('HINCRBY', meta, 'u_out', A.usage.output_tokens)
redis.call('HINCRBY', meta, 'u_total', A.usage.total_tokens)
redis.call('HINCRBY', meta, 'u_cached', A.usage.cached_input_tokens)
redis.call('HINCRBY', meta, 'u_reason', A.usage.reasoning_tokens)
redis.call('RPUSH', msgs, A.assistant)
for _, c in ipairs(A.calls) do
  redis.call('HSET', step, 'c:' .. c.id, c.call, 'st:' .. c.id, c.status)
  if c.result then redis.call('HSET', step, 'r:' .. c.id, c.result) end
end
emit_all(A.events)
for _, job in ipairs(A.jobs) do enqueue(job) end
if A.finishes_now then return succeed(step) end
if A.parked > 0 then redis.call('HSET', meta, 'status', 'awaiting') end
if A.pending == 0 then return join(A.step) end
return 'committed'
