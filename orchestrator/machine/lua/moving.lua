-- moving: a machine's index of live records by when each last moved (keys.py:
-- moving_runs, moving_calls), the window a sweeper reads.
-- Needs: K.MOVING_PREFIX, K.TAG_CLOSE, K.JOB_SEPARATOR, K.ARQ_JOB, K.ARQ_IN_PROGRESS (the
--   constants chunk).
-- Defines: moving_index(name, kind) -> the index key of the partition of the record whose
--   keys are named `name` (its tag and id); partition_key(name, prefix, kind) -> any
--   per-partition key built so (keys.py: _partitioned); held(job_id) -> whether a job is
--   in hand.
-- With one partition a record's tag is its own id and the index has none; else the index
-- carries the record's partition tag, so it shares the record's slot.
local function partition_key(name, prefix, kind)
  local close = string.find(name, K.TAG_CLOSE, 1, true)
  if close == #name then return prefix .. kind end
  return prefix .. string.sub(name, 1, close) .. K.JOB_SEPARATOR .. kind
end

local function moving_index(name, kind)
  return partition_key(name, K.MOVING_PREFIX, kind)
end

-- A job is in hand while its arq key lives (queued, or run until its end) or a worker's
-- lease holds it (its in-progress key): a sweeper enqueues a job again only when neither.
local function held(job_id)
  return redis.call('EXISTS', K.ARQ_JOB .. job_id, K.ARQ_IN_PROGRESS .. job_id) > 0
end
