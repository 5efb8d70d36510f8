-- begin_step: a model step starts; announce it and hand back what the model needs.
-- KEYS    meta, msgs, events (see prelude)
-- ARGV    BeginStep (spilled: event): step, event, known, known_stamp (the history the worker
--         holds)
-- Replies OK {spec, tools, messages, start, length, stamp, parent}  (tool and message
--            JSON strings, in order; messages from index `start` to `length`: after the
--            `known` the worker holds when its `known_stamp` is the run's `stamp`, else
--            all; none when they are more than HISTORY_INLINE_MAX (read outside);
--            spec and tools only with start 0 (a worker holding the history has them);
--            parent: a child run's parent call, for its progress; tenant, batch: the
--            shared budgets the worker checks before the model is asked)
--         UNKNOWN_RUN | CLOSED | STALE (not the current step)
--         CLOSED     also a run asked to stop at its step's end: cancelled now, unbegun
--         DUPLICATE  the step was committed already (a re-delivered job)
-- Effects a `start-step` event (again on each delivery before the commit: the attempt);
--         a delayed run's first step makes it running.
--         a limited tenant's run, the first time, no longer counted as queued.
-- A worker that holds none of the history needs the spec and tools' order too: read with
-- the rest.
local fields = {F.LOAD_TENANT, F.CREATED_AT, F.PARENT, F.TENANT, F.BATCH, F.COMMITTED}
if A.known == 0 then
  fields[#fields + 1] = F.SPEC
  fields[#fields + 1] = F.TOOL_ORDER
end
local err, run = run_guard(A.step, unpack(fields))
if err then return reply(err) end
if step_committed(A.step, run[13]) then return reply(OUT.DUPLICATE) end
-- Queued before a cancel at the step's end: the step is not begun, the run ends here.
if stopped_at_step_end() then return reply(OUT.CLOSED) end
if run[1] == RUN.SCHEDULED then
  redis.call('HSET', meta, F.STATUS, RUN.RUNNING)
end
emit(ARGV[A.event])
load_started(run[8])
-- The message list only grows (an entry is never rewritten), so what the worker holds
-- of this run is still its first `known` messages.
local stamp = run[9] or ''
local start = 0
if A.known > 0 and stamp ~= '' and A.known_stamp == stamp then
  start = A.known
end
-- More than a few messages to send (a worker that holds none or little of a long history)
-- are read outside (RunStore.begin_step): encoding them all here, as JSON, would hold
-- Redis for all of them. One more than those few is read: the list's length is asked
-- only when it is there.
local messages = redis.call('LRANGE', msgs, start, start + HISTORY_INLINE_MAX)
-- Nothing past the `known`: the worker holds all of it, or more than the run has (a
-- worker astray): then all of it.
if #messages == 0 and start > 0 and start > redis.call('LLEN', msgs) then
  start = 0
  messages = redis.call('LRANGE', msgs, start, HISTORY_INLINE_MAX)
end
local length = start + #messages
if #messages > HISTORY_INLINE_MAX then
  length, messages = redis.call('LLEN', msgs), {}
else
  for i, entry in ipairs(messages) do messages[i] = history_entry(entry) end
end
local out = {messages = messages, start = start, length = length, stamp = stamp,
             parent = run[10] or nil, tenant = run[11] or nil, batch = run[12] or nil}
-- The spec and tools are written once, at create: a worker holding the history holds them.
if start == 0 then
  local written = {run[14], run[15]}
  if A.known > 0 then written = redis.call('HMGET', meta, F.SPEC, F.TOOL_ORDER) end
  out.spec = written[1]
  local order = cjson.decode(written[2] or '[]')
  local tools = {}
  if #order > 0 then
    for _, tool in ipairs(redis.call('HMGET', tools_key(), unpack(order))) do
      if tool then tools[#tools + 1] = tool end
    end
  end
  out.tools = tools
end
return reply(OUT.OK, out)
