-- schedule_delete: the schedule and its tick records are gone (its runs stay, as runs).
-- KEYS    index, schedule, ticks, order (see prelude)
-- ARGV    ScheduleDelete: name, pending_tick, pending_job_id, timers_key
-- Replies DELETED | UNKNOWN
-- Effects the pending tick's timer removed when it is the one read (another finds no
--         schedule); the schedule's keys deleted, its name out of the index.
if redis.call('EXISTS', sched) == 0 then return reply(SOUT.UNKNOWN) end
drop_pending()
redis.call('DEL', sched, ticks, order)
redis.call('ZREM', index, A.name)
return reply(SOUT.DELETED)
