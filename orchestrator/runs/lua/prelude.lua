-- prelude: shared by every run transition; the generated constants chunk
-- (orchestrator/runs/state/lua_constants.py: RUN, CALL, AFTER, INPUT, OUT, F, S, K, USAGE,
-- CHILD_USAGE, COST, CHILD_COST,
-- TOOL_MESSAGE_OPEN/CLOSE) comes first.
--
-- KEYS[1] the run's meta hash, KEYS[2] its message list, KEYS[3] its event stream.
--   Every other key of the run (tools, steps, answers) derives from KEYS[1] and carries
--   the same hash tag (its partition's), and so do its job ids and the queues its jobs
--   go to (QueuedJob's keys, built in Python): a transition touches one slot.
-- ARGV[1] the transition's input model (orchestrator/runs/state/inputs.py) as JSON: `A`.
--   Read here: A.run_id, A.at, A.rider_wake (TransitionInput's own fields; rider_wake:
--   enqueue.lua's) and A.retention_s (the store adds it: ADDED_BY_STORE).
--   A field the input model types `Spilled` (machine/transition.py: JSON stored or sent as
--   it is) is not in ARGV[1] but beside it: A names it by its index, read as ARGV[A.field]
--   (a list of them: spilled_all).
-- Every script returns reply(...): one JSON object, {outcome = OUT.*, ...}. The helpers
-- every machine shares (reply, emit, enqueue) are includes (orchestrator/machine/lua/).
-- Every script checks before it writes, so a refused transition writes nothing.
-- A transition that hands the run's work on (create, commit_step, a result recorded, a
-- call unparked, redrive) scores it in its partition's moving index (`moved`); its end
-- removes it. The sweeper re-drives runs that sit there unmoved (redrive.lua). A job
-- that starts (begin_step, claim_call) does not move the run: its job is in hand (its
-- lease), which the sweeper checks before it enqueues anything, and the transition that
-- handed it on moved the run a moment before. A run scored less than MOVED_EVERY_S ago
-- is not scored again (`moved`).
local meta, msgs, events = KEYS[1], KEYS[2], KEYS[3]
local A = cjson.decode(ARGV[1])

-- @include reply
-- @include emit
-- @include enqueue
-- @include clock
-- @include moving
-- @include run_end
rider_wake = A.rider_wake

-- The values a list of spilled fields names (see the top), in order.
local function spilled_all(list)
  local values = {}
  for i, at in ipairs(list) do values[i] = ARGV[at] end
  return values
end

local function step_key(n)
  return meta .. K.STEP .. n
end

local function tools_key()
  return meta .. K.TOOLS
end

-- The run's end notice: a stream its waiters make empty (RunStore.watch_end: a consumer
-- group's MKSTREAM), into which its end writes its status (`e`), for a waiter to
-- block on (XREAD) rather than follow every event. Written only where a waiter made it
-- (NOMKSTREAM): a run nobody waits for costs one command on a missing key, no memory.
local function ended_key()
  return meta .. K.ENDED
end

-- A run's job ids are JOB_PREFIX .. name .. ':' where its meta key is RUN_PREFIX .. name
-- (keys.py's `tag`: the partition's hash tag and the run id).
local run_name = string.sub(meta, #K.RUN_PREFIX + 1)

local function job_prefix(n)
  return K.JOB_PREFIX .. run_name .. K.JOB_SEPARATOR .. n
end

-- The run moved (created, a step committed, a call answered or unparked): the sweeper
-- (runs/redrive.py) looks only at runs that have not moved for a while (its
-- redrive_after_s, 30 s unless set). A run scored less than MOVED_EVERY_S ago, as the
-- meta's MOVED_AT says (read by run_guard: `moved_at`), is not scored again: a fast step
-- then writes the index once a second rather than twice a step. Its score is then older
-- than its last move by less than that (and the callers' clock skew), so the sweeper looks
-- at a healthy run a little sooner (it finds it in hand), never later. MOVED_AT is the
-- caller's clock (A.at, the decision's only input: no TIME), written only beside a score
-- of this transition, and only where the transition writes the meta anyway (`moved_mark`):
-- left older, it is still a lower bound, so the next transition scores the run again.
-- Whatever else writes the entry (a delayed start, a hold, a sweep) clears it (`unmoved`).
local moving_key = moving_index(run_name, K.MOVING_RUNS)
local MOVED_EVERY_S = 1
local moved_at = nil
local scored = false
-- `always`: score it whatever MOVED_AT says (the sweeper found it stale).
local function moved(always)
  local since = moved_at and A.at - moved_at
  if not always and since and since >= 0 and since < MOVED_EVERY_S then return end
  redis.call('ZADD', moving_key, now_ms(), A.run_id)
  scored = true
end

-- A meta HSET's field, value list with MOVED_AT added when this transition scored the run.
local function moved_mark(fields)
  if scored then
    fields[#fields + 1] = F.MOVED_AT
    fields[#fields + 1] = A.at
  end
  return fields
end

-- The run's entry was removed, or scored later than now, by other than `moved`: the next
-- move scores it.
local function unmoved()
  redis.call('HDEL', meta, F.MOVED_AT)
  moved_at = nil
end

-- A limited tenant's runs, counted in the run's partition (core/tenant_limits.py): the
-- create that counts a run records its tenant in the meta, and its end uncounts it.
local tenant_load_key = partition_key(run_name, K.TENANTS_PREFIX, K.TENANT_LOAD)

-- The run's first step begins: no longer queued (it stays in flight until its end).
-- `tenant`: the meta's LOAD_TENANT, as the caller read it.
local function load_started(tenant)
  if tenant and redis.call('HDEL', meta, F.LOAD_QUEUED) == 1 then
    redis.call('HINCRBY', tenant_load_key, K.TENANT_QUEUED .. tenant, -1)
  end
end

-- The run ended: no longer counted (`tenant`, `queued`, `in_flight`: the meta's LOAD_*
-- fields as finish_run read them); the meta fields it clears are added to `gone`.
local function load_ended(tenant, queued, in_flight, gone)
  if not tenant then return end
  if queued then
    redis.call('HINCRBY', tenant_load_key, K.TENANT_QUEUED .. tenant, -1)
    gone[#gone + 1] = F.LOAD_QUEUED
  end
  if in_flight then
    redis.call('HINCRBY', tenant_load_key, K.TENANT_IN_FLIGHT .. tenant, -1)
    gone[#gone + 1] = F.LOAD_IN_FLIGHT
  end
  gone[#gone + 1] = F.LOAD_TENANT
end

local function is_terminal(status)
  return status == RUN.SUCCEEDED or status == RUN.FAILED or status == RUN.CANCELLED
end

local function is_parked(call_status)
  return call_status == CALL.AWAITING_APPROVAL or call_status == CALL.AWAITING_RESULT
end

-- Integer counters ({hash field, amount} pairs) added to a hash's: one HINCRBY for one,
-- else one HMGET and one HSET of the sums (a step's tokens are several: in, out, total,
-- cached, reasoning). `into`: {fields = a field, value list the caller writes to `key`
-- itself, read = {hash field = its value as the caller read it}}: the sums go there.
local function add_counts(key, added, into)
  if #added == 0 then return end
  if not into and #added == 1 then
    redis.call('HINCRBY', key, added[1][1], added[1][2])
    return
  end
  local read = into and into.read
  if not read then
    local names = {}
    for i, pair in ipairs(added) do names[i] = pair[1] end
    local values = redis.call('HMGET', key, unpack(names))
    read = {}
    for i, name in ipairs(names) do read[name] = values[i] end
  end
  local fields = into and into.fields or {}
  for _, pair in ipairs(added) do
    fields[#fields + 1] = pair[1]
    fields[#fields + 1] = string.format('%d', (tonumber(read[pair[1]]) or 0) + pair[2])
  end
  if not into then redis.call('HSET', key, unpack(fields)) end
end

-- Adds a Usage to a hash's totals: its tokens and its cost by kind ({Usage field, hash
-- field} pairs; `named`: the hash fields are the Usage's own names), or one more step
-- without a price (`unpriced`) when it has no cost. A field prefix (a tenant's) goes
-- before each hash field. The counts (tokens, unpriced) as add_counts adds them (`into`
-- its); each cost by HINCRBYFLOAT (Redis's long-double sum, as every total was kept).
local function add_usage(key, usage, tokens, costs, unpriced, prefix, named, into)
  prefix = prefix or ''
  local field = named and 1 or 2
  local added = {}
  for _, pair in ipairs(tokens) do
    local n = tonumber(usage[pair[1]]) or 0
    if n ~= 0 then added[#added + 1] = {prefix .. pair[field], n} end
  end
  local breakdown = usage.cost_breakdown
  local priced = breakdown ~= nil and breakdown ~= cjson.null
  if not priced then added[#added + 1] = {prefix .. unpriced, 1} end
  add_counts(key, added, into)
  if not priced then return end
  for _, pair in ipairs(costs) do
    local usd = tonumber(breakdown[pair[1]]) or 0
    if usd ~= 0 then redis.call('HINCRBYFLOAT', key, prefix .. pair[field], tostring(usd)) end
  end
end

-- The partition's totals by tenant (keys.py: tenant_usage), in the run's slot.
local function tenant_usage_key()
  return partition_key(run_name, K.USAGE_PREFIX, K.USAGE_TENANTS)
end

-- A batch's totals in the run's partition (keys.py: batch_usage): its budget is judged on them.
local function batch_usage_key(tenant, batch)
  local name = K.USAGE_BATCHES .. K.JOB_SEPARATOR .. tenant .. K.JOB_SEPARATOR .. batch
  return partition_key(run_name, K.USAGE_PREFIX, name)
end

-- The partition's runs held by a shared budget (keys.py: budgets_held).
local function held_key()
  return partition_key(run_name, K.BUDGETS_PREFIX, K.BUDGETS_HELD)
end

-- The run goes on past its hold (its step committed) or ended: no budget holds it now.
local function unhold()
  if redis.call('HDEL', meta, F.BUDGET_HELD) == 1 then redis.call('HDEL', held_key(), A.run_id) end
end

-- The meta fields of the run's own usage totals (tokens, cost by kind, unpriced steps),
-- appended to `fields` (built only when a run ends: a table built at the top would be on
-- every call).
local function usage_fields(fields)
  for _, pair in ipairs(USAGE) do fields[#fields + 1] = pair[2] end
  for _, pair in ipairs(COST) do fields[#fields + 1] = pair[2] end
  fields[#fields + 1] = F.UNPRICED
  return fields
end

-- The run's own usage totals as a Usage (tokens, and the cost unless a step had no price),
-- from the values of usage_fields as read.
local function usage_totals(values)
  local usage = {}
  for i, pair in ipairs(USAGE) do usage[pair[1]] = tonumber(values[i]) or 0 end
  if (tonumber(values[#values]) or 0) > 0 then
    usage.cost_usd, usage.cost_breakdown = cjson.null, cjson.null
    return usage
  end
  local breakdown, total = {}, 0
  for i, pair in ipairs(COST) do
    local usd = tonumber(values[#USAGE + i]) or 0
    breakdown[pair[1]], total = usd, total + usd
  end
  usage.cost_usd, usage.cost_breakdown = total, breakdown
  return usage
end

-- One command over a list of arguments (HSET's field, value pairs; RPUSH's entries), in
-- slices Lua's unpack can take (a step of a thousand calls); nothing for an empty list.
local function in_slices(command, key, args)
  for i = 1, #args, 1000 do
    redis.call(command, key, unpack(args, i, math.min(i + 999, #args)))
  end
end

local function hset_all(key, fields)
  in_slices('HSET', key, fields)
end

local function timers_key()
  return meta .. K.TIMERS
end

-- The run's lane (fair.lua's {tenant, key, rank offset ms}) as its guard read it (or its
-- create wrote it), which the run's own jobs are enqueued into: no decode of a job's
-- payload and no read of the meta again to find it. nil: not read (found from the payload).
local run_lane = nil

-- A run's job, remembering a timer so that the run's end removes it (drop_timers).
local function enqueue_run_job(job)
  if enqueue(job, run_lane) == 1 and is_timer(job) then
    redis.call('HSET', timers_key(), job.job_id, job.timers_key)
  end
end

-- An ended run's timers (parked calls' deadlines) fire for nothing: gone with it.
local function drop_timers()
  local timers = redis.call('HGETALL', timers_key())
  if #timers == 0 then return end
  for i = 1, #timers, 2 do
    redis.call('ZREM', timers[i + 1], timers[i])
    redis.call('DEL', K.ARQ_JOB .. timers[i])
  end
  redis.call('DEL', timers_key())
end

-- `last`: the run's last step.
local function expire_run(last)
  local ttl = A.retention_s
  redis.call('EXPIRE', meta, ttl)
  redis.call('EXPIRE', tools_key(), ttl)
  redis.call('EXPIRE', msgs, ttl)
  redis.call('EXPIRE', events, ttl)
  for i = 0, last do redis.call('EXPIRE', step_key(i), ttl) end
end

-- `output`: JSON spliced into the event as it is (a cjson round trip would turn an empty
-- array into an object). `ended` (optional): {meta = more meta field, value pairs to set
-- with the status, order = the current step's ORDER as the caller read it (false: none)}.
-- What the end reads of the meta is read at once.
local function finish_run(status, ev_type, fields, output, ended)
  ended = ended or {}
  local read = redis.call('HMGET', meta, unpack(usage_fields({
    F.STEP, F.LOAD_TENANT, F.LOAD_QUEUED, F.LOAD_IN_FLIGHT, F.BUDGET_HELD, F.END_JOB, F.PARENT_JOB})))
  local n = tonumber(read[1]) or 0
  local set = {F.STATUS, status, F.FINISHED_AT, A.at}
  for _, v in ipairs(ended.meta or {}) do set[#set + 1] = v end
  redis.call('HSET', meta, unpack(set))
  -- Its end jobs (a batch's admission, a thread's next run) hold no concurrency slot.
  local gone = {F.CONC_COUNTER}
  load_ended(read[2], read[3], read[4], gone)
  -- No budget holds it now.
  if read[5] then
    gone[#gone + 1] = F.BUDGET_HELD
    redis.call('HDEL', held_key(), A.run_id)
  end
  redis.call('HDEL', meta, unpack(gone))
  local ev = {type = ev_type, run_id = A.run_id, at = A.at, status = status,
              usage = usage_totals({unpack(read, 8)})}
  for k, v in pairs(fields) do ev[k] = v end
  local body = cjson.encode(ev)
  if output then body = string.sub(body, 1, -2) .. OUTPUT_MEMBER .. output .. string.sub(body, -1) end
  emit(body)
  redis.call('XADD', ended_key(), 'NOMKSTREAM', '0-*', 'e', status)
  expire_run(n)
  redis.call('ZREM', moving_key, A.run_id)
  drop_timers()
  -- A batch's run: its end is a job, so the fleet admits the batch's next line.
  local end_job = read[6]
  if end_job then
    local job = cjson.decode(end_job)
    job.score_ms = math.floor(A.at * 1000)
    enqueue(job)
  end
  -- A child run hands its parent's call the result: the job was fixed at create, its id
  -- carries this run's tag, and enqueueing it twice is a no-op.
  local parent_job = read[7]
  if parent_job then enqueue(cjson.decode(parent_job)) end
  -- The processes running the step's jobs abort them now (a cancel marked them), and
  -- workers keeping something for the run (sandbox sessions) let it go.
  local job_ids = {job_prefix(n) .. K.MODEL_JOB}
  local order = ended.order
  if order == nil then order = redis.call('HGET', step_key(n), S.ORDER) end
  if order then
    for _, id in ipairs(cjson.decode(order)) do
      job_ids[#job_ids + 1] = job_prefix(n) .. K.CALL_JOB .. id
    end
  end
  tell_run_end(A.run_id, job_ids)
end

-- The run cannot go on: record why (a RunFailure), once.
local function fail(failure)
  finish_run(RUN.FAILED, 'error', {error = failure}, nil, {meta = {F.ERROR, cjson.encode(failure)}})
  return OUT.FAILED
end

-- The failure a call's result ends the run with, or nil: an error of a call whose tool
-- says on_error fail-run (the call's record, `call`, is CallPlan JSON; `result`
-- ToolResultPart JSON). The result itself is kept and its event sent first.
local function tool_failure(n, call, result)
  -- A record without the value anywhere (most) is no fail-run call: no decode of it then
  -- (its input may hold the value too, so a record that does is decoded).
  if not string.find(call, FAIL_RUN_VALUE, 1, true) then return nil end
  if cjson.decode(call).on_error ~= ON_ERROR.FAIL_RUN then return nil end
  local part = cjson.decode(result)
  if not part.is_error then return nil end
  local kind = part.error_kind ~= cjson.null and part.error_kind or nil
  local said = type(part.output) == "string" and part.output or cjson.encode(part.output)
  return {type = FAILURE.TOOL, step = n, tool = part.tool_name, call_id = part.tool_call_id,
          error_kind = kind,
          message = string.format("the call %s to tool %q failed (%s): %s", part.tool_call_id,
                                  part.tool_name, kind or "error", said)}
end

-- `step`: the current step's hash.
local function succeed(step)
  local read = redis.call('HMGET', step, S.TEXT, S.FINISH_REASON, S.OUTPUT, S.ORDER)
  local text, reason, output = read[1] or '', read[2] or 'stop', read[3]
  local ended = {meta = {F.TEXT, text}, order = read[4]}
  if output then
    ended.meta[3], ended.meta[4] = F.OUTPUT, output
  end
  finish_run(RUN.SUCCEEDED, 'finish', {text = text, finish_reason = reason}, output, ended)
  return OUT.FINISHED
end

-- Step n's tool message: its results (each stored once, in the step hash) in call order.
-- `order`: the step's ORDER JSON when its reference carried it (else read here).
local function tool_message(n, order)
  local step = step_key(n)
  order = cjson.decode(order or redis.call('HGET', step, S.ORDER) or '[]')
  local parts = {}
  if #order > 0 then
    local fields = {}
    for i, id in ipairs(order) do fields[i] = S.RESULT .. id end
    parts = redis.call('HMGET', step, unpack(fields))
  end
  return TOOL_MESSAGE_OPEN .. table.concat(parts, ',') .. TOOL_MESSAGE_CLOSE
end

-- A message-list entry as readers see it: a stored message, or a reference to a step's
-- tool message (orchestrator/runs/state/history.py) resolved.
local function history_entry(entry)
  if string.sub(entry, 1, #TOOL_RESULTS_REF) == TOOL_RESULTS_REF then
    local rest = string.sub(entry, #TOOL_RESULTS_REF + 1)
    local order = string.find(rest, '[', 1, true)
    if order then
      return tool_message(tonumber(string.sub(rest, 1, order - 1)), string.sub(rest, order))
    end
    return tool_message(tonumber(rest))
  end
  return entry
end

-- Whether a cancel asked the run to stop at its step's end, and why (false: not asked),
-- as the guard read it (run_guard): every transition that ends a step passes it first.
local stop_asked = false

-- A run asked to stop at its step's end (cancel at_step_end) is cancelled at the step
-- boundary: whether it was (then no new step starts).
local function stopped_at_step_end()
  if not stop_asked then return false end
  finish_run(RUN.CANCELLED, 'abort', {reason = stop_asked ~= '' and stop_asked or nil})
  return true
end

-- All results of step n are in: the history gets its tool message (a reference to the
-- results, which the step hash holds), then either step n+1 is scheduled (next_job) or
-- the run finishes, as decided when the step was planned (or as a cancel at the step's
-- end asked: cancelled). `planned`: the step's {ORDER, AFTER} when the caller has them
-- (read with its guard, or its own input), else read here.
local function join(n, next_job, planned)
  local step = step_key(n)
  planned = planned or redis.call('HMGET', step, S.ORDER, S.AFTER)
  if #cjson.decode(planned[1]) > 0 then
    -- A short order rides in the reference (state/history.py: tool_results_ref).
    local order = #planned[1] <= REF_ORDER_MAX_BYTES and planned[1] or ''
    redis.call('RPUSH', msgs, TOOL_RESULTS_REF .. n .. order)
  end
  if planned[2] == AFTER.CONTINUE and stopped_at_step_end() then
    return OUT.FINISHED
  end
  if planned[2] == AFTER.CONTINUE then
    redis.call('HSET', meta, unpack(moved_mark({F.STEP, n + 1, F.STATUS, RUN.RUNNING})))
    enqueue(next_job, run_lane)
    return OUT.CONTINUED
  end
  return succeed(step)
end

-- Write a call's result once; the completion that brings the count to zero joins.
-- `call`: the call's record (CallPlan JSON) as call_guard read it; `planned`: join's.
-- `pending`: the step's pending count, when the caller's guard read it together with the
-- call's result and found none (nothing runs between, in one script): the result, the
-- call's status and the count are then written in one HSET. Else HSETNX writes the
-- result once, and the count is decremented apart.
local function record(n, id, result, result_events, next_job, call, planned, pending)
  local step = step_key(n)
  local fields = {S.CALL_STATUS .. id, CALL.DONE}
  if pending then
    fields[3], fields[4] = S.RESULT .. id, result
  elseif redis.call('HSETNX', step, S.RESULT .. id, result) == 0 then
    return OUT.DUPLICATE
  end
  moved()
  local failure = tool_failure(n, call, result)
  -- A failing call ends the run: its count is left as it was.
  if pending and not failure then
    fields[5], fields[6] = S.PENDING, pending - 1
  end
  redis.call('HSET', step, unpack(fields))
  emit_all(result_events)
  if failure then return fail(failure) end
  local left = pending and pending - 1 or redis.call('HINCRBY', step, S.PENDING, -1)
  if left > 0 then return OUT.RECORDED end
  return join(n, next_job, planned)
end

local function unpark(n)
  moved()
  if redis.call('HINCRBY', step_key(n), S.PARKED, -1) <= 0
     and redis.call('HGET', meta, F.STATUS) == RUN.AWAITING then
    redis.call('HSET', meta, F.STATUS, RUN.RUNNING)
  end
end

-- The guard of every step and call transition: the run exists, is live, and `n` is its step.
-- One HMGET reads the status, the step, whether a cancel asked it to stop at the step's
-- end (`stop_asked`), the run's lane (`run_lane`), when it was last scored as moving
-- (`moved_at`) and the other meta fields `...` the transition needs (all it will read of
-- the meta on its common path): the refusal (or nil), then what was read, in that order
-- (false: unset; `...` from index 8).
local function run_guard(n, ...)
  local read = redis.call('HMGET', meta, F.STATUS, F.STEP, F.STOP_AT_STEP_END,
                          F.FAIR_TENANT, F.FAIR_KEY, F.FAIR_RANK, F.MOVED_AT, ...)
  stop_asked = read[3]
  moved_at = tonumber(read[7])
  if not read[1] then return OUT.UNKNOWN_RUN, read end
  if is_terminal(read[1]) then return OUT.CLOSED, read end
  if tonumber(read[2]) ~= n then return OUT.STALE, read end
  -- As fair.lua's fair_lane_of reads it for a job of this run.
  run_lane = {read[4] or FAIR.DEFAULT_TENANT, read[5] or FAIR.DEFAULT_KEY, tonumber(read[6]) or 0}
  return nil, read
end

-- Whether step n was committed (its resp written), given the meta's COMMITTED as the
-- guard read it: a step committed with calls out is recorded there (commit_step), and one
-- committed without any leaves the run at a later step, or ended, which the guard
-- refuses first. A run without the field (created before it was kept): the step's hash.
local function step_committed(n, committed)
  if committed then return tonumber(committed) == n end
  return redis.call('HEXISTS', step_key(n), S.RESP) == 1
end

-- The guard of every call transition: run_guard, and the call is one of step n's.
-- Returns the refusal's reply, or nil, the call's status (the script checks it) and its
-- record (CallPlan JSON), read together with the other fields `...` of the step's hash
-- the transition needs (returned after them, in that order).
local function call_read(n, call_id, ...)
  local call = redis.call('HMGET', step_key(n), S.CALL_STATUS .. call_id, S.CALL .. call_id, ...)
  if not call[1] then return reply(OUT.UNKNOWN_CALL) end
  return nil, unpack(call)
end

local function call_guard(n, call_id, ...)
  local err = run_guard(n)
  if err then return reply(err) end
  return call_read(n, call_id, ...)
end
