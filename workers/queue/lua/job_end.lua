-- job_end: a worker's job ends done inside the transition it rode behind
--   (claims.ending: the transition's script runs first, as a function; this runs when
--   it returned, and the transition's reply is the call's). A job whose lease names
--   no concurrency key only: the same writes as take.lua's end of such a job, so a
--   riding end needs no TAKE call of its own.
-- KEYS    after the transition's own: [-2] the worker's jobs hash, [-1] the job's queue
-- ARGV    after the transition's own: [-2] the worker id, [-1] the job id
-- Replies none of its own: the transition's reply is the call's.
-- Effects as take.lua's done end: the lease record goes; the in-progress key with arq's
--         job and retry keys when the job was still this worker's (its record here, or
--         the key naming it), else only arq's keys; the job leaves its queue. A
--         transition that raised (a full Redis refusing its first write among others)
--         ends nothing: the job stays held, to be ended by the worker.
-- @include job_done
local ended_jobs, ended_queue = KEYS[#KEYS - 1], KEYS[#KEYS]
local ender, ended = ARGV[#ARGV - 1], ARGV[#ARGV]
job_done(ended_queue, ended,
  redis.call('HDEL', ended_jobs, ended) == 1
    or redis.call('GET', JOB_END.PROGRESS .. ended) == ender,
  JOB_END.PROGRESS, JOB_END.RETRY, JOB_END.JOB)
