-- call_emit: events of a running call (progress) are appended.
-- KEYS    call, events (see call_prelude)
-- ARGV    EmitCall: events
-- Replies EMITTED {seq}  the last event's sequence (0: the call had ended, nothing added)
--         UNKNOWN_CALL
-- Effects the events, unless the call has its result.
if not redis.call('HGET', call, CF.STATUS) then return reply(OUT.UNKNOWN_CALL) end
if redis.call('HEXISTS', call, CF.RESULT) == 1 then return reply(OUT.EMITTED, {seq = 0}) end
local seq = 0
for _, ev in ipairs(A.events) do seq = emit(ev) end
return reply(OUT.EMITTED, {seq = seq})
