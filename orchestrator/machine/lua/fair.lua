-- fair: a ready job into its lane (orchestrator/core/fairness.py).
-- Needs: FAIR (the constants `fairness.lua_chunk()` renders).
-- Defines: fair_keys(queue_key) -> {ring, turns, weights, lane = prefix of a lane's key};
--   fair_run_meta(queue_key, run_id) -> the run's meta key in the queue's partition;
--   fair_lane_of(queue_key, payload) -> lane, weight, rank offset ms;
--   fair_index(queue_key, id, due, payload): the job ready in its lane.
-- Every key derives from the queue's, so it is in the queue's partition (its slot); a
-- job's lane is its run's (the run's meta hash, in the same partition since the job's
-- id carries its run's tag), or its payload's tenant's (a batch's admission), or the
-- default tenant's.

local function fair_keys(queue_key)
  local base = FAIR.FAIR_PREFIX .. string.sub(queue_key, #FAIR.QUEUE_PREFIX + 1)
  return {
    ring = base .. FAIR.RING,
    turns = base .. FAIR.TURNS,
    weights = base .. FAIR.WEIGHTS,
    lane = base .. FAIR.LANE,
  }
end

-- The meta key of `run_id` if it lives in `queue_key`'s partition (keys.meta): the
-- partition's tag and the id, or the id as the tag with one partition.
local function fair_run_meta(queue_key, run_id)
  local rest = string.sub(queue_key, #FAIR.QUEUE_PREFIX + 1)
  if string.sub(rest, 1, 1) == FAIR.TAG_OPEN then
    local close = string.find(rest, FAIR.TAG_CLOSE, 1, true)
    return FAIR.RUN_PREFIX .. string.sub(rest, 1, close) .. FAIR.SEPARATOR .. run_id
  end
  return FAIR.RUN_PREFIX .. FAIR.TAG_OPEN .. run_id .. FAIR.TAG_CLOSE
end

-- {lane, weight, rank offset ms} of a job, from its payload (arq's layout: a[1] is
-- the envelope).
local function fair_lane_of(queue_key, payload)
  local ok, body = pcall(cjson.decode, payload)
  local envelope = ok and type(body) == 'table' and type(body.a) == 'table' and body.a[1]
  if type(envelope) ~= 'table' then return FAIR.DEFAULT_LANE, 1, 0 end
  if type(envelope.run_id) == 'string' then
    local lane = redis.call('HMGET', fair_run_meta(queue_key, envelope.run_id),
                            FAIR.LANE_FIELD, FAIR.WEIGHT_FIELD, FAIR.RANK_FIELD)
    if lane[1] then return lane[1], tonumber(lane[2]) or 1, tonumber(lane[3]) or 0 end
  end
  if type(envelope.tenant) == 'string' then return envelope.tenant, 1, 0 end
  return FAIR.DEFAULT_LANE, 1, 0
end

local function fair_index(queue_key, id, due, payload)
  local lane, weight, rank = fair_lane_of(queue_key, payload)
  local fk = fair_keys(queue_key)
  redis.call('ZADD', fk.lane .. lane, due - rank, id)
  -- A lane joins the ring at its tail once: its turn entry is its place in the ring.
  if redis.call('HSETNX', fk.turns, lane, 0) == 1 then redis.call('RPUSH', fk.ring, lane) end
  redis.call('HSET', fk.weights, lane, weight)
  redis.call('ZADD', queue_key, due - FAIR.OFFSET, id)
end
