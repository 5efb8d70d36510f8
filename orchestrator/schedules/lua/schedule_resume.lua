-- schedule_resume: ticks fire again, from the first one after now (what fell due while
-- it was paused never fires).
-- KEYS    index, schedule, ticks, order (see prelude)
-- ARGV    ScheduleResume: name, next_tick, next_job
-- Replies RESUMED | UNCHANGED (not paused) | UNKNOWN
-- Effects not paused; the pending tick and its timer.
if redis.call('EXISTS', sched) == 0 then return reply(SOUT.UNKNOWN) end
if redis.call('HGET', sched, SF.PAUSED) ~= '1' then return reply(SOUT.UNCHANGED) end
redis.call('HSET', sched, SF.PAUSED, '0', SF.NEXT, A.next_tick)
enqueue(A.next_job)
return reply(SOUT.RESUMED)
