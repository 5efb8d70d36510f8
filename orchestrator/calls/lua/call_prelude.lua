-- call_prelude.lua: shared by every transition of a tool call without a run
-- (orchestrator/calls/state.py); the generated constants chunk comes first.
--
-- KEYS[1] the call's hash, KEYS[2] its event stream; both carry the call id's hash tag.
-- ARGV[1] the transition's input model as JSON: `A`. Read here: A.call_id, A.at,
--   A.retention_s (CallTransitionInput's own fields).
-- Every script returns reply(...): one JSON object, {outcome = OUT.*, ...}, and checks
-- before it writes, so a refused transition writes nothing.
local call, events = KEYS[1], KEYS[2]
local A = cjson.decode(ARGV[1])

local function reply(outcome, fields)
  local r = fields or {}
  r.outcome = outcome
  return cjson.encode(r)
end

-- The event's sequence number is its stream id, as for a run's events.
local function emit(ev)
  local seq = redis.call('HINCRBY', call, CF.SEQ, 1)
  redis.call('XADD', events, '0-' .. seq, 'e', ev)
  return seq
end

-- Enqueue in arq's own layout (job key + queue zset), then wake a sleeping worker.
local function enqueue(job)
  local job_key = K.ARQ_JOB .. job.job_id
  if redis.call('EXISTS', job_key) == 1 then return 0 end
  redis.call('PSETEX', job_key, job.expires_ms, job.payload)
  redis.call('ZADD', job.queue_key, job.score_ms, job.job_id)
  if job.wake then
    redis.call('LPUSH', job.wake_key, '1')
    redis.call('LTRIM', job.wake_key, 0, 63)
  end
  return 1
end

local function keep_for_retention()
  redis.call('EXPIRE', call, A.retention_s)
  redis.call('EXPIRE', events, A.retention_s)
end

-- Write the call's result once: the first of a worker's result and a cancellation wins.
local function finish(result, ev)
  if redis.call('HSETNX', call, CF.RESULT, result) == 0 then return false end
  redis.call('HSET', call, CF.STATUS, CALL.DONE, CF.FINISHED_AT, A.at)
  emit(ev)
  keep_for_retention()
  return true
end
