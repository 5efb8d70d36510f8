-- deliver: a parked step's answer written once, and the step's model job enqueued to
--   take it.
-- KEYS    [1] the step's batch record, [2] the job's arq key, [3] its queue, [4] its
--         wake-up list (what `enqueue` writes, declared).
-- ARGV    [1] the answer, [2] the job (QueuedJob, orchestrator/core/queued_job.py, as JSON).
-- Replies 1 delivered, 0 delivered before.
-- Effects the record's result; the job enqueued (unless it exists).
-- @include enqueue

if redis.call('HSETNX', KEYS[1], 'result', ARGV[1]) == 0 then return 0 end
enqueue(cjson.decode(ARGV[2]))
return 1
