-- conc: concurrency keys in the claim (orchestrator/concurrency/).
-- Needs: CONC (the constants `concurrency.slots.lua_chunk()` renders), FAIR (fair.lua's).
-- Defines: conc_admit(counter, max, run) -> true when the run holds a slot (one more job counted);
--   conc_hold(counter, queue_key, id, due, meta_key): the job waits for a slot, out of
--   its lane;
--   conc_put_back(counter, n): the key's oldest held jobs back into their queues, until
--   n of live runs are (a cancelled run's go back too, for the claim to drop);
--   conc_release(record): a lease record's job ended: its run's count lowered, and its
--   slot freed (and held jobs put back) once the run has no job running;
--   conc_claim(queue_key, id, due, payload) -> the lease record's addition ('' for a
--   run without a key), or nil when the job is held: the claim of one given job (a
--   remote lease, claim_one.lua), as take.lua's look does it;
--   conc_held_key(queue_key) -> the queue's held jobs (keys.held), which a queue's depth
--   counts apart; conc_index(counter) -> its partition's active keys
--   (keys.concurrency_active), which a tenant's list of keys reads.
-- A run's key is its meta's CONC.COUNTER_FIELD and CONC.MAX_FIELD (the claim reads them
-- with its lane's weights). A key's counter is a hash, run id -> its jobs running: a run holds one slot however
-- many of its jobs run (parallel tool calls). Its held jobs are a sorted set by due
-- time of [queue, job, its run's meta key] (JSON). Both are in the run's slot (its runs are placed there),
-- as is every queue its jobs go to.
-- @include wake
-- @include fair

-- The partition's active keys (keys.concurrency_active: counter -> max), which the
-- dashboard lists by tenant: a key is in it from its first claim until it holds no
-- slot and no held job.
local function conc_index(counter)
  local rest = #CONC.PREFIX + 1
  if string.sub(counter, rest, rest) == CONC.TAG_OPEN then
    local close = string.find(counter, CONC.TAG_CLOSE, rest, true)
    return string.sub(counter, 1, close + #CONC.SEPARATOR) .. CONC.ACTIVE
  end
  return CONC.PREFIX .. CONC.ACTIVE
end

local function conc_admit(counter, max, run)
  if redis.call('HEXISTS', counter, run) == 0 then
    if redis.call('HLEN', counter) >= max then return false end
    -- A run taking a slot: the key is active (a key at its max has such runs already).
    redis.call('HSET', conc_index(counter), counter, max)
  end
  redis.call('HINCRBY', counter, run, 1)
  return true
end

-- A queue's held jobs (keys.held): what its depth counts apart from ready work. A job
-- is in it exactly while it is in a key's held jobs.
local function conc_held_key(queue_key)
  return CONC.HELD_PREFIX .. string.sub(queue_key, #CONC.QUEUE_PREFIX + 1)
end

local function conc_hold(counter, queue_key, id, due, meta_key)
  redis.call('ZADD', counter .. CONC.WAIT, due, cjson.encode({queue_key, id, meta_key}))
  redis.call('ZADD', conc_held_key(queue_key), due, id)
end

-- A held job goes back into its lane at its due time (fair_put_back), and its queue is
-- woken.
-- A job of a run that ended meanwhile (cancelled) goes back too, for that claim to drop,
-- but does not count: a freed slot never sits beside held work of live runs. Each held
-- job is popped once, so the cost is bounded by the jobs held.
local function conc_put_back(counter, n)
  local wait = counter .. CONC.WAIT
  while n > 0 do
    local held = redis.call('ZPOPMIN', wait)
    if #held == 0 then return end
    local entry = cjson.decode(held[1])
    local queue_key, id, meta_key = entry[1], entry[2], entry[3]
    redis.call('ZREM', conc_held_key(queue_key), id)
    local score = redis.call('ZSCORE', queue_key, id)
    -- still ready (not claimed, ended or gone), and not expired
    if score and tonumber(score) < 0 and fair_put_back(queue_key, id, tonumber(held[2])) then
      wake(CONC.WAKE_PREFIX .. string.sub(queue_key, #CONC.QUEUE_PREFIX + 1))
      if redis.call('HEXISTS', meta_key, CONC.COUNTER_FIELD) == 1 then n = n - 1 end
    end
  end
end

local function conc_release(record)
  local ok, rec = pcall(cjson.decode, record)
  if not ok or type(rec) ~= 'table' or type(rec.k) ~= 'string' then return end
  if redis.call('HINCRBY', rec.k, rec.r, -1) <= 0 then
    redis.call('HDEL', rec.k, rec.r)
    conc_put_back(rec.k, CONC.PUT_BACK)
    if redis.call('EXISTS', rec.k, rec.k .. CONC.WAIT) == 0 then
      redis.call('HDEL', conc_index(rec.k), rec.k)
    end
  end
end

-- A given job (claim_one.lua: a remote service picks it from the queue itself, not from
-- its lane) is claimed under its run's key as take.lua's look claims a lane's head, and
-- a job held before and taken now leaves the key's held jobs (it was never put back).
local function conc_claim(queue_key, id, due, payload)
  local run = payload and string.match(payload, '"run_id":%s*"([^"]+)"')
  if not run then return '' end
  local meta_key = fair_run_meta(queue_key, run)
  local conc = redis.call('HMGET', meta_key, CONC.COUNTER_FIELD, CONC.MAX_FIELD)
  local counter, max = conc[1], tonumber(conc[2])
  if not counter then return '' end
  if not conc_admit(counter, max, run) then
    conc_hold(counter, queue_key, id, due, meta_key)
    return nil
  end
  if redis.call('ZREM', counter .. CONC.WAIT, cjson.encode({queue_key, id, meta_key})) == 1 then
    redis.call('ZREM', conc_held_key(queue_key), id)
  end
  if redis.call('HLEN', counter) < max then conc_put_back(counter, 1) end
  return ',"k":' .. cjson.encode(counter) .. ',"r":' .. cjson.encode(run)
end
