-- schedule_tick: a worker claimed a tick's job; the tick fires once, whoever claims it.
-- KEYS    index, schedule, ticks, order (see prelude)
-- ARGV    ScheduleTick: name, generation, tick, run_id (the run it fires) or reason (why
--         none; `refused` with the refusal's error), previous (the run cancel-previous
--         cancels), next_tick, next_job, keep
-- Replies FIRED | SKIPPED  the tick is claimed now, as the input says
--         RECORDED {record}  it was claimed before (a re-delivered or doubled job): what
--                   that claim recorded, for the worker to finish (its run is created
--                   under the same id: never a second run)
--         STALE     not the pending tick of this incarnation (paused, resumed, deleted
--                   and created again): nothing happens
--         UNKNOWN   no such schedule (deleted)
-- Effects the tick's record (the oldest beyond `keep` dropped), the pending tick moved to
--         next_tick and its timer set, the fired or skipped count, the last run.
if redis.call('EXISTS', sched) == 0 then return reply(SOUT.UNKNOWN) end
if tonumber(redis.call('HGET', sched, SF.GENERATION)) ~= A.generation then
  return reply(SOUT.STALE)
end
local known = redis.call('HGET', ticks, A.tick)
if known then return reply(SOUT.RECORDED, {record = known}) end
if redis.call('HGET', sched, SF.NEXT) ~= A.tick then return reply(SOUT.STALE) end
local record = {tick = tonumber(A.tick) / 1000, at = A.at, run_id = A.run_id,
                previous = A.previous, skipped = A.reason, error = A.error}
redis.call('HSET', ticks, A.tick, cjson.encode(record))
redis.call('ZADD', order, A.tick, A.tick)
local over = redis.call('ZCARD', order) - A.keep
if over > 0 then
  local oldest = redis.call('ZRANGE', order, 0, over - 1)
  redis.call('HDEL', ticks, unpack(oldest))
  redis.call('ZREMRANGEBYRANK', order, 0, over - 1)
end
redis.call('HSET', sched, SF.NEXT, A.next_tick)
enqueue(A.next_job)
if A.run_id then
  redis.call('HSET', sched, SF.LAST_RUN, A.run_id)
  redis.call('HINCRBY', sched, SF.FIRED, 1)
  return reply(SOUT.FIRED)
end
redis.call('HINCRBY', sched, SF.SKIPPED, 1)
return reply(SOUT.SKIPPED)
