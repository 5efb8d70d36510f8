-- call_cancel: the caller gave up on the call (an MCP client's notifications/cancelled).
-- KEYS    call, events (see call_prelude)
-- ARGV    CancelCall: result, event, job_id, abort_key (the abort set of its partition)
-- Replies CANCELLED
--         UNKNOWN_CALL
--         DUPLICATE     the call had its result already (it stays as it ended)
-- Effects the cancellation as the call's error result (write-once), status done, a
--         `tool-error` event, and an arq abort mark for the call's job.
if not redis.call('HGET', call, CF.STATUS) then return reply(OUT.UNKNOWN_CALL) end
if not finish(A.result, A.event) then return reply(OUT.DUPLICATE) end
redis.call('HSET', call, CF.CANCELLED, '1')
redis.call('ZADD', A.abort_key, math.floor(A.at * 1000), A.job_id)
return reply(OUT.CANCELLED)
