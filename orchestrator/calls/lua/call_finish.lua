-- call_finish: a worker's result (or error) for the call comes in.
-- KEYS    call, events (see call_prelude)
-- ARGV    FinishCall: result, event
-- Replies RECORDED
--         UNKNOWN_CALL
--         DUPLICATE     the call has its result (a re-delivered job, or it was cancelled)
-- Effects the result (write-once), status done, a `tool-result` or `tool-error` event.
if not redis.call('HGET', call, CF.STATUS) then return reply(OUT.UNKNOWN_CALL) end
if not finish(A.result, A.event) then return reply(OUT.DUPLICATE) end
return reply(OUT.RECORDED)
