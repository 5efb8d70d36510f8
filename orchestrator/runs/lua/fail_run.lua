-- fail_run: the run cannot go on (a provider refused, a bug): record why, once.
-- KEYS    meta, msgs, events (see prelude)
-- ARGV    FailRun: error (a RunFailure)
-- Replies FAILED | UNKNOWN_RUN | CLOSED
-- Effects status failed, the error, an `error` event, the run's keys expire, run-ended.
local status = redis.call('HGET', meta, F.STATUS)
if not status then return reply(OUT.UNKNOWN_RUN) end
if is_terminal(status) then return reply(OUT.CLOSED) end
return reply(fail(A.error))
