-- enqueue: a job in arq's own layout, atomically with the transition that causes it.
-- Needs: K.ARQ_JOB (the constants chunk), FAIR (fair.lua's).
-- Defines: is_timer(job); enqueue(job, lane) -> 1, or 0 when the job exists already; `job` is a
--   QueuedJob (orchestrator/core/queued_job.py) decoded; `lane` (optional) its lane, as
--   fair_index takes it, when the caller knows it; rider_wake (nil, or a wake-up list a
--   machine's prelude sets: see below).
-- The job key with its payload, the job ready in its queue and its lane (fair.lua),
-- then a token that wakes a sleeping worker; a timer (a job due later) goes to its
-- timer set instead, and wakes nobody (the claim moves it into the queue when due). Job ids are derived from what
-- they do: enqueueing twice is a no-op.
-- @include wake
-- @include fair
local function is_timer(job)
  -- A job stored before timers existed (a run's end job) has no such field: nil.
  return job.timers_key ~= nil and job.timers_key ~= ''
end

-- The wake-up list of a worker that claims from its queue in this transition's own round
-- trip (a job's end handing the next job to a claim loop of its process asleep on that list:
-- workers/queue/arq_worker.py), set by the runs' prelude from the input's `rider_wake`.
-- The first ready job enqueued there pushes no token: that claim takes it, and a token
-- would only wake the sleeping claim to find it gone.
local rider_wake = nil

local function enqueue(job, lane)
  local job_key = K.ARQ_JOB .. job.job_id
  -- A job sent as it is enqueued (transition.py: SentJob) has its payload beside the input.
  local payload = job.payload
  if type(payload) == 'number' then payload = ARGV[payload] end
  -- One write that says whether the job existed (NX): enqueueing twice is a no-op.
  if not redis.call('SET', job_key, payload, 'PX', job.expires_ms, 'NX') then return 0 end
  if is_timer(job) then
    redis.call('ZADD', job.timers_key, job.score_ms, job.job_id)
    return 1
  end
  fair_index(job.queue_key, job.job_id, job.score_ms, payload, lane)
  if job.wake_key == rider_wake then rider_wake = nil else wake(job.wake_key) end
  return 1
end
