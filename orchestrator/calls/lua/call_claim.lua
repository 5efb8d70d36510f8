-- call_claim: the call's job starts on a worker.
-- KEYS    call, events (see call_prelude)
-- ARGV    ClaimToolCall: event
-- Replies CLAIMED {call, tool}  (CallPlan JSON, ToolDef JSON)
--         UNKNOWN_CALL          no such call (expired with its retention)
--         DONE                  the call has its result (a re-delivered job, or cancelled)
-- Effects status running; a `tool-running` event; the call scored as moved now.
local st = redis.call('HGET', call, CF.STATUS)
if not st then return reply(OUT.UNKNOWN_CALL) end
if redis.call('HEXISTS', call, CF.RESULT) == 1 then return reply(OUT.DONE) end
redis.call('HSET', call, CF.STATUS, CALL.RUNNING, CF.STARTED_AT, A.at)
emit(A.event)
moved()
local fields = redis.call('HMGET', call, CF.CALL, CF.TOOL)
return reply(OUT.CLAIMED, {call = fields[1], tool = fields[2]})
