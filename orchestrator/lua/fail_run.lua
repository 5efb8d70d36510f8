-- The run cannot go on (a provider refused, a bug): record why, once.
local status = redis.call('HGET', meta, 'status')
if not status then return 'unknown-run' end
if is_terminal(status) then return 'closed' end
redis.call('HSET', meta, 'error', A.error)
finish_run('failed', 'error', {error = cjson.decode(A.error)})
return 'failed'
