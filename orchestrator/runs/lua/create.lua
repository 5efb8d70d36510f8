#!lua flags=allow-cross-slot-keys
-- create: make a run once and schedule its step 0.
-- KEYS    meta, msgs, events (see prelude)
-- ARGV    CreateRun: spec, spec_hash, tools, tool_order, messages, trace, event, next_job,
--         end_job (optional: enqueued when the run ends, see finish_run in the prelude),
--         depth, lane, slot (a concurrency key's, optional); a fork also: start_step, steps (its first steps' hashes), usage,
--         n_initial, origin; a child run also: parent, parent_job; a delayed run also:
--         start_at_ms; tenant (whose run it is); batch (a batch line's or its
--         sub-agents'); a limited tenant's: tenant_load; a run queued on its thread: hold
-- Replies CREATED
--         EXISTS    the id holds a run of the same spec (an idempotent resubmission)
--         CONFLICT  the id holds a run of another spec: nothing is written
--         OVER_LIMIT {limit, cap}  the tenant is at a cap: nothing is written
-- Effects meta hash (status running, step 0, usage 0, lane), tools hash, the initial
--         messages, a `start` event, the model job of step 0 (a fork: of start_step,
--         with the copied step hashes, usage totals and origin); a child run also keeps its
--         parent link and the job its end enqueues (see finish_run in the prelude); a
--         limited tenant's run is counted in flight (a batch's line: in its batches'
--         count instead) and queued (the tenant load hash).
--         A delayed run is created `scheduled`: its first model job is one of its timers
--         (a cancel drops it; begin_step makes it running), and it is scored in the
--         moving index at its start, so the sweeper leaves it alone until then.
--         A held run (queued on its thread) is created `queued`: its first model job is
--         kept in the meta, not enqueued, and it is not in the moving index, until
--         start_queued (its thread's turn; a cancel ends it while it waits).
-- Flags   the shebang (no `no-writes`, no `allow-oom`) says the script may write, so
--         Redis 7 refuses it whole, before it runs, while Redis is over its maxmemory:
--         a full Redis takes no new run (a create's first write is a DEL, which a full
--         Redis would let through), and no `admit` call of its own is sent first.
--         `allow-cross-slot-keys`: on a cluster it touches keys as a script without a
--         shebang may (a shebang alone would hold it to one slot).
if redis.call('EXISTS', meta) == 1 then
  local stored = redis.call('HGET', meta, F.SPEC_HASH)
  if stored and stored ~= A.spec_hash then return reply(OUT.CONFLICT) end
  return reply(OUT.EXISTS)
end
-- A limited tenant's run (core/tenant_limits.py): refused at its tenant's caps (counting
-- the other partitions' runs, read just before), else counted until it starts and ends.
local load = A.tenant_load
if load then
  local in_flight_field = K.TENANT_IN_FLIGHT .. load.tenant
  local queued_field = K.TENANT_QUEUED .. load.tenant
  if load.enforce then
    local counts = redis.call('HMGET', tenant_load_key, in_flight_field, queued_field)
    local in_flight = (tonumber(counts[1]) or 0) + load.others_in_flight
    local queued = (tonumber(counts[2]) or 0) + load.others_queued
    if load.max_in_flight and in_flight >= load.max_in_flight then
      return reply(OUT.OVER_LIMIT, {limit = LIMIT.MAX_IN_FLIGHT, cap = load.max_in_flight})
    end
    if load.max_queued and queued >= load.max_queued then
      return reply(OUT.OVER_LIMIT, {limit = LIMIT.MAX_QUEUED, cap = load.max_queued})
    end
  end
  if not load.batch_line then redis.call('HINCRBY', tenant_load_key, in_flight_field, 1) end
  redis.call('HINCRBY', tenant_load_key, queued_field, 1)
end
-- Without a meta hash, any other key of the id is a leftover: start clean.
redis.call('DEL', msgs, events, tools_key(), ended_key())
local status = RUN.RUNNING
if A.start_at_ms then status = RUN.SCHEDULED end
if A.hold then status = RUN.QUEUED end
-- The meta hash in one HSET (its usage totals at 0 first, the fork's added after).
local fields = {F.SPEC, A.spec, F.SPEC_HASH, A.spec_hash, F.STATUS, status,
                F.STEP, A.start_step, F.CREATED_AT, A.at,
                F.N_INITIAL, A.n_initial or #A.messages,
                F.TRACE, A.trace, F.TOOL_ORDER, cjson.encode(A.tool_order), F.DEPTH, A.depth,
                -- Read by every enqueue of the run's jobs (machine/lua/fair.lua) and
                -- by the claim (its weights).
                F.FAIR_TENANT, A.lane.tenant, F.FAIR_KEY, A.lane.key,
                F.FAIR_WEIGHT, A.lane.weight, F.FAIR_TENANT_WEIGHT, A.lane.tenant_weight,
                F.FAIR_RANK, A.lane.rank_ms}
local function set(field, value)
  fields[#fields + 1] = field
  fields[#fields + 1] = value
end
for _, pair in ipairs(USAGE) do set(pair[2], 0) end
if A.tenant then set(F.TENANT, A.tenant) end
if A.batch then set(F.BATCH, A.batch) end
if A.start_at_ms then set(F.START_AT, A.start_at_ms / 1000) end
if A.origin then set(F.ORIGIN, A.origin) end
-- Scored as moving now (`moved`, at the end), unless delayed or held.
if not A.start_at_ms and not A.hold then set(F.MOVED_AT, A.at) end
set(F.COMMITTED, A.start_step - 1)
if load then
  set(F.LOAD_TENANT, load.tenant)
  set(F.LOAD_QUEUED, 1)
  if not load.batch_line then set(F.LOAD_IN_FLIGHT, 1) end
end
if A.end_job then set(F.END_JOB, cjson.encode(A.end_job)) end
if A.slot then
  set(F.CONC_COUNTER, A.slot.counter)
  set(F.CONC_MAX, A.slot.max)
  set(F.CONC_KEY, A.slot.key)
end
if A.parent then
  set(F.PARENT, A.parent)
  set(F.PARENT_JOB, cjson.encode(A.parent_job))
end
hset_all(meta, fields)
if A.usage then add_usage(meta, A.usage, USAGE, COST, F.UNPRICED) end
-- A fork: the original's first steps, as they were recorded.
for i, recorded in ipairs(A.steps) do
  local step_fields = {}
  for field, value in pairs(recorded) do
    step_fields[#step_fields + 1] = field
    step_fields[#step_fields + 1] = value
  end
  hset_all(step_key(i - 1), step_fields)
end
-- Tools are offered to the model in the spec's order (stable prompts cache better).
local tools = {}
for _, name in ipairs(A.tool_order) do
  tools[#tools + 1] = name
  tools[#tools + 1] = A.tools[name]
end
hset_all(tools_key(), tools)
in_slices('RPUSH', msgs, A.messages)
emit(A.event)
if A.hold then
  redis.call('HSET', meta, F.HELD_JOB, cjson.encode(A.next_job))
  return reply(OUT.CREATED)
end
run_lane = {A.lane.tenant, A.lane.key, A.lane.rank_ms}
enqueue_run_job(A.next_job)
if A.start_at_ms then
  redis.call('ZADD', moving_key, A.start_at_ms, A.run_id)
else
  moved()
end
return reply(OUT.CREATED)
