-- schedule_pause: no tick fires until resumed.
-- KEYS    index, schedule, ticks, order (see prelude)
-- ARGV    SchedulePause: name, pending_tick, pending_job_id, timers_key (the pending
--         tick's timer as the caller read it)
-- Replies PAUSED | UNCHANGED (paused already) | UNKNOWN
-- Effects paused; no pending tick (a timer the caller missed finds it stale); the pending
--         tick's timer removed when it is the one read.
if redis.call('EXISTS', sched) == 0 then return reply(SOUT.UNKNOWN) end
if redis.call('HGET', sched, SF.PAUSED) == '1' then return reply(SOUT.UNCHANGED) end
drop_pending()
redis.call('HSET', sched, SF.PAUSED, '1', SF.NEXT, '')
return reply(SOUT.PAUSED)
