-- enqueue: a job in arq's own layout, atomically with the transition that causes it.
-- Needs: K.ARQ_JOB (the constants chunk).
-- Defines: enqueue(job) -> 1, or 0 when the job exists already; `job` is a QueuedJob
--   (orchestrator/core/queued_job.py) decoded.
-- The job key with its payload, its score in the queue, then a token that wakes a
-- sleeping worker. Job ids are derived from what they do: enqueueing twice is a no-op.
-- @include wake
local function enqueue(job)
  local job_key = K.ARQ_JOB .. job.job_id
  if redis.call('EXISTS', job_key) == 1 then return 0 end
  redis.call('PSETEX', job_key, job.expires_ms, job.payload)
  redis.call('ZADD', job.queue_key, job.score_ms, job.job_id)
  if job.wake then wake(job.wake_key) end
  return 1
end
