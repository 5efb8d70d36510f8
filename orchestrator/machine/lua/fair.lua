-- fair: a ready job into its lane (orchestrator/core/fairness.py).
-- Needs: FAIR (the constants `fairness.lua_chunk()` renders).
-- Defines: fair_keys(queue_key) -> {ring, keys = prefix of a tenant's key ring,
--   lane = prefix of a lane's key};
--   fair_lane_key(fk, tenant, key) -> the lane's sorted set;
--   fair_entry(left, name) -> a ring entry; fair_parse(entry) -> left, name;
--   fair_only_mark(tenant, key) -> the only lane's mark (see fair_index);
--   fair_unmark_only(fk, tenant_entry): the mark off the first lane of that tenant;
--   fair_run_meta(queue_key, run_id) -> the run's meta key in the queue's partition;
--   fair_lane_of(queue_key, payload) -> tenant, key, rank offset ms;
--   fair_index(queue_key, id, due, payload, lane): the job ready in its lane (`lane`:
--   {tenant, key, rank offset ms} when the caller knows it, else read from the payload);
--   fair_put_back(queue_key, id, due) -> true when the job (its payload read) is ready in
--   its lane again, false when its payload expired (it leaves the queue).
-- Every key derives from the queue's, so it is in the queue's partition (its slot); a
-- job's lane is its run's (the run's meta hash, in the same partition since the job's
-- id carries its run's tag), or its payload's tenant's default key (a batch's
-- admission), or the default tenant's.

local function fair_keys(queue_key)
  local base = FAIR.FAIR_PREFIX .. string.sub(queue_key, #FAIR.QUEUE_PREFIX + 1)
  return {ring = base .. FAIR.RING, keys = base .. FAIR.KEYS, lane = base .. FAIR.LANE}
end

local function fair_lane_key(fk, tenant, key)
  return fk.lane .. tenant .. FAIR.LANE_SEPARATOR .. key
end

local function fair_entry(left, name)
  return left .. FAIR.TURN_SEPARATOR .. name
end

local function fair_parse(entry)
  local cut = string.find(entry, FAIR.TURN_SEPARATOR, 1, true)
  return tonumber(string.sub(entry, 1, cut - 1)), string.sub(entry, cut + 1)
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

-- {tenant, key, rank offset ms} of a job, from its payload (arq's layout: a[1] is the
-- envelope).
local function fair_lane_of(queue_key, payload)
  local ok, body = pcall(cjson.decode, payload)
  local envelope = ok and type(body) == 'table' and type(body.a) == 'table' and body.a[1]
  if type(envelope) ~= 'table' then return FAIR.DEFAULT_TENANT, FAIR.DEFAULT_KEY, 0 end
  if type(envelope.run_id) == 'string' then
    local lane = redis.call('HMGET', fair_run_meta(queue_key, envelope.run_id),
                            FAIR.TENANT_FIELD, FAIR.KEY_FIELD, FAIR.RANK_FIELD)
    if lane[1] then return lane[1], lane[2] or FAIR.DEFAULT_KEY, tonumber(lane[3]) or 0 end
  end
  if type(envelope.tenant) == 'string' then return envelope.tenant, FAIR.DEFAULT_KEY, 0 end
  return FAIR.DEFAULT_TENANT, FAIR.DEFAULT_KEY, 0
end

-- The queue's only listed lane holds a second mark (FAIR.ONLY and its names, scored -inf:
-- before every job) from when it joins both rings alone until another lane joins them:
-- a claim that reads its head learns it may skip the rings (take.lua). A lane joining a
-- ring of one takes the mark from the lane listed before it (a few reads, only then).
local function fair_only_mark(tenant, key)
  return FAIR.ONLY .. cjson.encode({tenant, key})
end

-- The lane a tenant's ring entry names first loses the mark, if it held it.
local function fair_unmark_only(fk, tenant_entry)
  if not tenant_entry then return end
  local _, tenant = fair_parse(tenant_entry)
  local key_entry = redis.call('LINDEX', fk.keys .. tenant, 0)
  if not key_entry then return end
  local _, key = fair_parse(key_entry)
  redis.call('ZREM', fair_lane_key(fk, tenant, key), fair_only_mark(tenant, key))
end

-- A listed lane holds its mark (FAIR.LISTED, scored +inf: after every job) besides its
-- jobs, from when it joins its tenant's ring until it leaves it: so the one write that
-- puts a job in its lane also says whether the lane was listed (two new members: it was
-- not). A lane that was not joins its tenant's ring at the tail, and the tenant the ring
-- of tenants when it was its first lane listed. A lane stays listed while it has ready
-- jobs, and a tenant's sole lane, when it is the queue's only one, also once the claim
-- took its last job (take.lua: a kept lane), so a lone tenant's lane does not leave and
-- rejoin both rings on every job; the claim that next finds it empty drops it. A job
-- indexed again (a lease taken outside the claim left its entry) is no new member. A
-- run's transition enqueueing the run's own job passes the lane it read with its guard:
-- no decode of the payload, no second read.
local function fair_index(queue_key, id, due, payload, lane)
  local tenant, key, rank
  if lane then
    tenant, key, rank = lane[1], lane[2], lane[3]
  else
    tenant, key, rank = fair_lane_of(queue_key, payload)
  end
  local fk = fair_keys(queue_key)
  local lane_key = fair_lane_key(fk, tenant, key)
  if redis.call('ZADD', lane_key, due - rank, id, FAIR.LISTED_SCORE, FAIR.LISTED) == 2 then
    local tenant_keys = fk.keys .. tenant
    local listed_keys = redis.call('RPUSH', tenant_keys, fair_entry(0, key))
    if listed_keys == 1 then
      local listed_tenants = redis.call('RPUSH', fk.ring, fair_entry(0, tenant))
      if listed_tenants == 1 then
        redis.call('ZADD', lane_key, FAIR.ONLY_SCORE, fair_only_mark(tenant, key))
      elseif listed_tenants == 2 then  -- the other tenant's lane may have been the only one
        fair_unmark_only(fk, redis.call('LINDEX', fk.ring, 0))
      end
    elseif listed_keys == 2 then  -- the tenant's other lane may have been the only one
      local _, other = fair_parse(redis.call('LINDEX', tenant_keys, 0))
      redis.call('ZREM', fair_lane_key(fk, tenant, other), fair_only_mark(tenant, other))
    end
  end
  redis.call('ZADD', queue_key, due - FAIR.OFFSET, id)
end

-- A job put back at the time it was due by anything but an enqueue (a release, a reaper,
-- a give-back, a held job's slot freed, a timer fallen due) goes straight into its lane,
-- so no claim has to look for such jobs in the queue.
local function fair_put_back(queue_key, id, due)
  local payload = redis.call('GET', FAIR.JOB_PREFIX .. id)
  if not payload then  -- expired before anyone ran it
    redis.call('ZREM', queue_key, id)
    return false
  end
  fair_index(queue_key, id, due, payload)
  return true
end
