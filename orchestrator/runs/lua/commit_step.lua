-- commit_step: record a model step's answer and apply its plan: each call is queued,
-- parked or answered at once; the step joins at once if nothing is pending.
-- KEYS    meta, msgs, events (see prelude)
-- ARGV    CommitStep (spilled: resp, assistant, each call's call and result, events): step, resp, assistant, text, finish_reason, usage, after, order,
--         calls[{id, call, status, result}], events, jobs, pending, parked,
--         finishes_now, next_job? (sent when it joins), batch, output?, follow, failure?
--         (a RunFailure: the run fails once the step is recorded), windows, window_ttl_s
--         (a periodic tenant budget's windows the step counts in)
-- Replies COMMITTED (calls out) | CONTINUED | FINISHED (joined at once; or a run asked
--         to stop at its step's end cancelled, at the join or instead of parking)
--         FAILED (the input's failure: a budget the step went over)
--         FAILED (a call answered at once with an error its tool's on_error fail-run ends the run on)
--         UNKNOWN_RUN | CLOSED | STALE | DUPLICATE (committed before)
-- Effects the step hash (resp written once, a DUPLICATE found by the guard's read; the structured output the step gave), usage
--         and cost totals (batch-priced ones apart; the tenant's and a batch line's batch's in
--         their partition's hashes; a budget's hold cleared), the assistant message and the messages that
--         follow it (an invalid output sent back), each
--         call's record and status, the step's events, tool jobs and expiry timers
--         (remembered in the run's timers hash); status awaiting if a call parked; the join if nothing is pending.
-- The guard reads the run's token totals and unpriced count too: the step's are added to
-- them in the meta's one HSET below (state/status.py: USAGE_FIELDS), no HINCRBY each.
local guarded = {F.TENANT, F.BATCH, F.BUDGET_HELD, F.TOOL_CALLS, F.COMMITTED, F.UNPRICED}
for _, pair in ipairs(USAGE) do guarded[#guarded + 1] = pair[2] end
-- A step answered through a provider's batch API is counted apart too (batches/usage.py).
local batch_counts = A.batch and {{F.BATCH_STEPS, 1}, {F.BATCH_INPUT, A.usage.input_tokens},
                                  {F.BATCH_OUTPUT, A.usage.output_tokens}}
for _, pair in ipairs(batch_counts or {}) do guarded[#guarded + 1] = pair[1] end
local err, run = run_guard(A.step, unpack(guarded))
if err then return reply(err) end
local step = step_key(A.step)
-- Written once: a step committed is found in the meta as the guard read it (a step
-- committed with calls out says so in COMMITTED below; one without any left the run at a
-- later step, or ended it, which the guard refused), the step's hash for a run without
-- the field. The resp then goes in with the step's other fields.
if step_committed(A.step, run[12]) then return reply(OUT.DUPLICATE) end
moved()
-- The step's fields and each call's record, status and result at once, in one HSET.
local fields = {S.RESP, ARGV[A.resp], S.TEXT, A.text, S.FINISH_REASON, A.finish_reason,
                S.AFTER, A.after, S.ORDER, A.order, S.PENDING, A.pending, S.PARKED, A.parked}
local function set(field, value)
  fields[#fields + 1] = field
  fields[#fields + 1] = value
end
for _, c in ipairs(A.calls) do
  c.call, c.result = ARGV[c.call], c.result and ARGV[c.result]
  set(S.CALL .. c.id, c.call)
  set(S.CALL_STATUS .. c.id, c.status)
  if c.result then set(S.RESULT .. c.id, c.result) end
end
if A.batch then set(S.BATCH, '1') end
if A.output then set(S.OUTPUT, A.output) end
hset_all(step, fields)
-- What the meta gets, written in one HSET once the step is recorded.
local counted = {fields = {}, read = {}}
for i = 6, #guarded do counted.read[guarded[i]] = run[7 + i] end
add_usage(meta, A.usage, USAGE, COST, F.UNPRICED, nil, nil, counted)
if batch_counts then add_counts(meta, batch_counts, counted) end
local tenant = run[8] or K.DEFAULT_TENANT
-- The partition's, a batch's and a window's totals are kept under the Usage's own names.
add_usage(tenant_usage_key(), A.usage, USAGE, COST, F.UNPRICED, tenant .. K.JOB_SEPARATOR, true)
-- A batch's run: charged to its batch's budget here, with the step it pays for, so a
-- re-delivered commit charges nothing twice and a recorded step is never left uncharged.
local batch = run[9]
if batch then
  local key = batch_usage_key(tenant, batch)
  add_usage(key, A.usage, USAGE, COST, F.UNPRICED, nil, true)
  redis.call('EXPIRE', key, A.retention_s)
end
-- A tenant's budget with a period: the step counts in its window's totals too.
for _, window in ipairs(A.windows) do
  local key = partition_key(run_name, K.USAGE_PREFIX, K.USAGE_TENANTS .. K.JOB_SEPARATOR .. window)
  add_usage(key, A.usage, USAGE, COST, F.UNPRICED, tenant .. K.JOB_SEPARATOR, true)
  redis.call('EXPIRE', key, A.window_ttl_s)
end
-- A run a shared budget held goes on: no longer held.
if run[10] then unhold() end
redis.call('RPUSH', msgs, ARGV[A.assistant])
for _, message in ipairs(A.follow) do redis.call('RPUSH', msgs, message) end
-- The count as read by the guard, set with the step committed (its calls out: a
-- re-delivered begin_step reads it, step_committed) and when the run was scored as moving:
-- one write.
-- The step's usage counts (counted above) go in the same write, before a run's end reads
-- its totals.
local meta_fields = counted.fields
if #A.calls > 0 then
  local calls = (tonumber(run[11]) or 0) + #A.calls
  for _, v in ipairs({F.TOOL_CALLS, calls, F.COMMITTED, A.step}) do meta_fields[#meta_fields + 1] = v end
end
if #meta_fields > 0 then redis.call('HSET', meta, unpack(moved_mark(meta_fields))) end
emit_all(spilled_all(A.events))
-- A step that went over the run's budget: recorded (its usage counts), then the end.
if A.failure then return reply(fail(A.failure)) end
-- A call refused at once (its input) whose tool says on_error fail-run: nothing runs.
for _, c in ipairs(A.calls) do
  local failure = c.result and tool_failure(A.step, c.call, c.result)
  if failure then return reply(fail(failure)) end
end
for _, job in ipairs(A.jobs) do enqueue_run_job(job) end
if A.finishes_now then return reply(succeed(step)) end
if A.parked > 0 then
  -- A run asked to stop at its step's end does not wait on the outside: it ends here.
  if stopped_at_step_end() then return reply(OUT.FINISHED) end
  redis.call('HSET', meta, F.STATUS, RUN.AWAITING)
end
if A.pending == 0 then return reply(join(A.step, A.next_job, {A.order, A.after})) end
return reply(OUT.COMMITTED)
