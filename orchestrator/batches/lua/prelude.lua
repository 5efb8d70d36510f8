-- prelude: shared by every batch transition; the generated constants chunk
-- (orchestrator/runs/state/lua_constants.py render_batch: K, BATCH, LINE, BOUT, BF, SF, RF,
-- BK) comes first.
--
-- KEYS[1] the tenant's scheduler hash, KEYS[2] its batches waiting for room under its
--   in-flight cap (a zset, in the order they began waiting), KEYS[3] its batch index. A
--   batch's own keys (meta, ids, specs, records, pending, running) derive from KEYS[1]
--   and carry the same hash tag, so a transition touches one Redis Cluster slot (arq's
--   queue keys excepted).
-- ARGV[1] the transition's input model (orchestrator/batches/state.py) as JSON: `A`.
-- Every script returns reply(...): one JSON object, {outcome = BOUT.*, ...}. reply and
-- enqueue are the includes every machine shares (orchestrator/machine/lua/).
local sched, waiting, index = KEYS[1], KEYS[2], KEYS[3]
local A = cjson.decode(ARGV[1])
local base = string.sub(sched, 1, #sched - #BK.SCHED)

-- @include reply
-- @include enqueue
-- @include clock
-- @include moving

local function bkey(id, suffix)
  return base .. BK.SEP .. id .. (suffix or '')
end

local function batch_keys(id)
  return {bkey(id), bkey(id, BK.IDS), bkey(id, BK.SPECS), bkey(id, BK.RECORDS),
          bkey(id, BK.PENDING), bkey(id, BK.RUNNING)}
end

local function num(value)
  return tonumber(value) or 0
end

-- The moving index (batches/redrive.py) holds a batch while it has lines to admit, and
-- each admitted line until its end is recorded, by when each last moved: the sweeper
-- looks only at the entries unmoved for a while. An entry names its tenant, so one
-- partition's index serves every tenant in it.
local moving_key = moving_index(string.sub(base, #BK.PREFIX + 1), K.MOVING_BATCHES)
local function entry(id, line)
  local tenant = redis.call('HGET', bkey(id), BF.TENANT)
  if line then return cjson.encode({tenant, id, tostring(line)}) end
  return cjson.encode({tenant, id})
end

local function moved(id, line)
  redis.call('ZADD', moving_key, now_ms(), entry(id, line))
end

local function settled(id, line)
  redis.call('ZREM', moving_key, entry(id, line))
end

-- An unsealed batch expires unless its upload goes on (or it is sealed: persist).
local function expire_upload(id, ttl_s)
  for _, key in ipairs(batch_keys(id)) do
    if ttl_s then redis.call('EXPIRE', key, ttl_s) else redis.call('PERSIST', key) end
  end
end

-- Every line ended: the batch is done (or stays cancelled) and starts its retention.
local function finish_if_done(id)
  local m = bkey(id)
  local v = redis.call('HMGET', m, BF.STATUS, LINE.QUEUED, LINE.RUNNING, BF.RETENTION_S)
  if v[1] ~= BATCH.RUNNING and v[1] ~= BATCH.CANCELLED then return end
  if num(v[2]) > 0 or num(v[3]) > 0 then return end
  if v[1] == BATCH.RUNNING then redis.call('HSET', m, BF.STATUS, BATCH.DONE) end
  redis.call('HSET', m, BF.FINISHED_AT, A.at)
  redis.call('ZREM', waiting, id)
  settled(id)
  for _, key in ipairs(batch_keys(id)) do redis.call('EXPIRE', key, v[4]) end
end

-- Whether batch `id` has a line to admit, its tenant's cap aside: it runs, has lines
-- pending and is below its own concurrency.
local function can_admit(id)
  local v = redis.call('HMGET', bkey(id), BF.STATUS, BF.CONCURRENCY, BF.INFLIGHT)
  return v[1] == BATCH.RUNNING and num(v[3]) < num(v[2])
    and redis.call('LLEN', bkey(id, BK.PENDING)) > 0
end

-- A batch the tenant's cap stops waits at the back of the waiting batches (or keeps its
-- place there).
local function wait_for_room(id)
  redis.call('ZADD', waiting, 'NX', redis.call('HINCRBY', sched, SF.WAIT_SEQ, 1), id)
end

-- Admit the next line of batch `picked` into `out`.
local function admit_line(picked, out)
  local m = bkey(picked)
  local line = redis.call('LPOP', bkey(picked, BK.PENDING))
  local recs = bkey(picked, BK.RECORDS)
  local rec = cjson.decode(redis.call('HGET', recs, line))
  rec[RF.ATTEMPT] = num(rec[RF.ATTEMPT]) + 1
  -- Placed beside the line's concurrency key's counter, when it has one.
  rec[RF.RUN_ID] = (rec[RF.PLACEMENT] or '') .. redis.call('HGET', m, BF.RUN_PREFIX)
    .. line .. '.' .. rec[RF.ATTEMPT]
  rec[RF.STATUS] = LINE.RUNNING
  -- The job that admits it creates its run: if that job is lost, the sweeper enqueues
  -- it again (its settle answers with the same admissions).
  rec[RF.ADMITTED_BY] = A.by
  redis.call('HSET', recs, line, cjson.encode(rec))
  redis.call('SADD', bkey(picked, BK.RUNNING), rec[RF.RUN_ID])
  redis.call('HINCRBY', m, LINE.QUEUED, -1)
  redis.call('HINCRBY', m, LINE.RUNNING, 1)
  redis.call('HINCRBY', m, BF.INFLIGHT, 1)
  redis.call('HINCRBY', sched, SF.INFLIGHT, 1)
  moved(picked, line)
  if redis.call('LLEN', bkey(picked, BK.PENDING)) == 0 then settled(picked) else moved(picked) end
  out[#out + 1] = {batch_id = picked, line = tonumber(line), run_id = rec[RF.RUN_ID]}
end

-- Admit the settling batch's own lines, up to its concurrency. Batches take no turns
-- here: each admits its own, and the claim interleaves their runs as it does any of
-- their tenant's (docs/fairness.md). The one limit a tenant's batches share is its cap (its
-- max_in_flight, AGENTQ_TENANT_LIMITS), which bounds its batches' lines together with
-- its other runs (A.others_in_flight, counted apart and read just before): lines past it
-- wait here rather than being refused, and their batch waits for room. A place freed
-- then goes to the batch that has waited longest, one line each in turn, so no batch
-- waits for another to finish.
local function admit()
  local out = {}
  local cap = A.tenant_cap
  if cap <= 0 then
    while can_admit(A.batch_id) do admit_line(A.batch_id, out) end
    return out
  end
  local inflight = num(redis.call('HGET', sched, SF.INFLIGHT)) + A.others_in_flight
  if can_admit(A.batch_id) then wait_for_room(A.batch_id) end
  while inflight < cap do
    local first = redis.call('ZRANGE', waiting, 0, 0)[1]
    if not first then break end
    redis.call('ZREM', waiting, first)
    -- A batch that ended, or that reached its own concurrency (its ends admit its next
    -- lines), leaves the waiting batches.
    if can_admit(first) then
      admit_line(first, out)
      inflight = inflight + 1
      if can_admit(first) then wait_for_room(first) end
    end
  end
  return out
end
