-- Cancel a run: no further step is scheduled, and in-flight jobs are asked to abort.
local status = redis.call('HGET', meta, 'status')
if not status then return 'unknown-run' end
if is_terminal(status) then return status end
local n = tonumber(redis.call('HGET', meta, 'step'))
local now_ms = math.floor(A.at * 1000)
redis.call('ZADD', 'arq:abort', now_ms, A.job_prefix .. n .. ':model')
local order = redis.call('HGET', step_key(n), 'order')
if order then
  for _, id in ipairs(cjson.decode(order)) do
    redis.call('ZADD', 'arq:abort', now_ms, A.job_prefix .. n .. ':call:' .. id)
  end
end
finish_run('cancelled', 'abort', {reason = A.reason})
return 'cancelled'
