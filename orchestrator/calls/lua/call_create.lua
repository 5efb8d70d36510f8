-- call_create: a tool call without a run is created and its job enqueued, once.
-- KEYS    call, events (see call_prelude)
-- ARGV    CreateCall: tool, call, input_hash, tenant, trace, event, job
-- Replies CREATED
--         EXISTS {call_status}  the id (an idempotency key's) has this very call already
--         CONFLICT              the id is taken by a call of another tool or input
-- Effects the call's hash (status queued), a `tool-call` event, its job, its entry in
--         the partition's moving index (call_prelude: moved); both keys
--         expire after the retention even if no worker ever takes the call.
local st = redis.call('HGET', call, CF.STATUS)
if st then
  if redis.call('HGET', call, CF.INPUT_HASH) ~= A.input_hash then return reply(OUT.CONFLICT) end
  return reply(OUT.EXISTS, {call_status = st})
end
redis.call('HSET', call, CF.TOOL, A.tool, CF.CALL, A.call, CF.INPUT_HASH, A.input_hash,
  CF.STATUS, CALL.QUEUED, CF.TENANT, A.tenant, CF.TRACE, A.trace, CF.CREATED_AT, A.at)
emit(A.event)
enqueue(A.job)
keep_for_retention()
moved()
return reply(OUT.CREATED)
