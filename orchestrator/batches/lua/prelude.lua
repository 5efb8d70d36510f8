-- prelude: shared by every batch transition; the generated constants chunk
-- (orchestrator/runs/state/lua_constants.py render_batch: K, BATCH, LINE, BOUT, BF, SF, RF,
-- BK) comes first.
--
-- KEYS[1] the tenant's scheduler hash, KEYS[2] its ring of admitting batches (a zset
--   scored by round-robin pass), KEYS[3] its batch index. A batch's own keys (meta, ids,
--   specs, records, pending, running) derive from KEYS[1] and carry the same hash tag,
--   so a transition touches one Redis Cluster slot (arq's queue keys excepted).
-- ARGV[1] the transition's input model (orchestrator/batches/state.py) as JSON: `A`.
-- Every script returns reply(...): one JSON object, {outcome = BOUT.*, ...}. reply and
-- enqueue are the includes every machine shares (orchestrator/machine/lua/).
local sched, ring, index = KEYS[1], KEYS[2], KEYS[3]
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

-- A batch joins the ring at the lowest pass in it: it takes its turn from now on,
-- without a burst to catch up with batches that have run for a while.
local function ring_join(id)
  if redis.call('ZSCORE', ring, id) then return end
  local first = redis.call('ZRANGE', ring, 0, 0, 'WITHSCORES')
  redis.call('ZADD', ring, tonumber(first[2]) or 0, id)
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
  redis.call('ZREM', ring, id)
  settled(id)
  for _, key in ipairs(batch_keys(id)) do redis.call('EXPIRE', key, v[4]) end
end

-- Admit lines across the tenant's batches: the batch with the lowest pass that is
-- below its concurrency goes next, and its pass moves on by its stride (1 / priority),
-- so batches take turns, a batch of priority 2 twice as often. The tenant's cap
-- (its max_in_flight, AGENTQ_TENANT_LIMITS), when set, bounds its runs in flight: its
-- batches' lines together and its other runs (A.others_in_flight, counted apart and read
-- just before): the lines past it wait here rather than being refused.
local function admit()
  local out = {}
  local cap = A.tenant_cap
  local inflight = num(redis.call('HGET', sched, SF.INFLIGHT)) + A.others_in_flight
  while cap <= 0 or inflight < cap do
    local picked = nil
    for _, id in ipairs(redis.call('ZRANGE', ring, 0, -1)) do
      local v = redis.call('HMGET', bkey(id), BF.STATUS, BF.CONCURRENCY, BF.INFLIGHT)
      if v[1] ~= BATCH.RUNNING or redis.call('LLEN', bkey(id, BK.PENDING)) == 0 then
        redis.call('ZREM', ring, id)
      elseif num(v[3]) < num(v[2]) then
        picked = id
        break
      end
    end
    if not picked then break end
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
    inflight = inflight + 1
    redis.call('ZINCRBY', ring, redis.call('HGET', m, BF.STRIDE), picked)
    moved(picked, line)
    if redis.call('LLEN', bkey(picked, BK.PENDING)) == 0 then settled(picked) else moved(picked) end
    out[#out + 1] = {batch_id = picked, line = tonumber(line), run_id = rec[RF.RUN_ID]}
  end
  return out
end
