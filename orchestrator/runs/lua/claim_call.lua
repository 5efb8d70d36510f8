-- claim_call: a tool job starts; the call must still want running.
-- KEYS    meta, msgs, events (see prelude)
-- ARGV    ClaimCall (spilled: event): step, call_id, event, known_stamp? (the run's stamp
--         under which the worker holds the run's tools)
-- Replies CLAIMED {call, tool, tool_held}  (CallPlan JSON; ToolDef JSON, absent if not
--         defined; tool_held instead when known_stamp is the run's: the tool not read)
--         UNKNOWN_RUN | CLOSED | STALE | UNKNOWN_CALL
--         DONE          the call has its result (a re-delivered job)
--         NOT_RUNNABLE {call_status}  a parked call is not run by a worker
-- Effects call status running; a `tool-running` event (with the tool's name).
-- call_guard, with the run's stamp read by the run's guard.
local err, run = run_guard(A.step, F.CREATED_AT)
if err then return reply(err) end
local refused, st, call, result = call_read(A.step, A.call_id, S.RESULT .. A.call_id)
if refused then return refused end
if result then return reply(OUT.DONE) end
local step = step_key(A.step)
if st ~= CALL.QUEUED and st ~= CALL.RUNNING then
  return reply(OUT.NOT_RUNNABLE, {call_status = st})
end
local name = cjson.decode(call).name
redis.call('HSET', step, S.CALL_STATUS .. A.call_id, CALL.RUNNING)
-- The event with the tool's name spliced in before its closing brace: no cjson round trip
-- of the event.
local event = ARGV[A.event]
emit(string.sub(event, 1, -2) .. TOOL_NAME_MEMBER .. cjson.encode(name) .. string.sub(event, -1))
-- The run's tools are written once, at create: a worker that read them under this run's
-- stamp holds this one (or knows it is not defined).
if A.known_stamp and A.known_stamp == run[8] then
  return reply(OUT.CLAIMED, {call = call, tool_held = true})
end
local tool = redis.call('HGET', tools_key(), name)
return reply(OUT.CLAIMED, {call = call, tool = tool or nil})
