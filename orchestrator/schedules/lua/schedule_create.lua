-- schedule_create: store a schedule once and set its first tick's timer.
-- KEYS    index, schedule, ticks, order (see prelude)
-- ARGV    ScheduleCreate: name, tenant, cron, tz, overlap, catchup, spec, definition,
--         generation, next_tick, next_job (the first tick's timer)
-- Replies CREATED
--         EXISTS    the name holds the same schedule (an idempotent re-create)
--         CONFLICT  the name holds another schedule: nothing is written
-- Effects the schedule's hash, its name in the index, the first tick's timer.
if redis.call('EXISTS', sched) == 1 then
  if redis.call('HGET', sched, SF.DEFINITION) == A.definition then return reply(SOUT.EXISTS) end
  return reply(SOUT.CONFLICT)
end
redis.call('DEL', ticks, order)  -- leftovers of a schedule deleted under this name
redis.call('HSET', sched, SF.NAME, A.name, SF.TENANT, A.tenant, SF.CRON, A.cron, SF.TZ, A.tz,
           SF.OVERLAP, A.overlap, SF.CATCHUP, A.catchup, SF.SPEC, A.spec,
           SF.DEFINITION, A.definition, SF.GENERATION, A.generation, SF.CREATED_AT, A.at,
           SF.PAUSED, '0', SF.NEXT, A.next_tick, SF.FIRED, 0, SF.SKIPPED, 0)
redis.call('ZADD', index, A.at, A.name)
enqueue(A.next_job)
return reply(SOUT.CREATED)
