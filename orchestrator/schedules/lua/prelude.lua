-- prelude: shared by every schedule transition; the generated constants chunk
-- (orchestrator/runs/state/lua_constants.py render: K, SOUT, SF) comes first.
--
-- KEYS[1] the tenant's schedule index (a zset of names by creation time), KEYS[2] the
--   schedule's hash, KEYS[3] its tick records (tick ms -> TickRecord JSON), KEYS[4] its
--   recorded ticks by time. All carry the tenant's tag `{s.<tenant>}`, and so do its
--   tick jobs and the timer set they wait in: a transition touches one slot.
-- ARGV[1] the transition's input model (orchestrator/schedules/state.py) as JSON: `A`.
-- Every script returns reply(...): {outcome = SOUT.*, ...}.
local index, sched, ticks, order = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local A = cjson.decode(ARGV[1])

-- @include reply
-- @include enqueue

-- The pending tick's timer, if it is still the one the caller read: gone (its job too).
local function drop_pending()
  if A.pending_tick ~= '' and redis.call('HGET', sched, SF.NEXT) == A.pending_tick then
    redis.call('ZREM', A.timers_key, A.pending_job_id)
    redis.call('DEL', K.ARQ_JOB .. A.pending_job_id)
  end
end
