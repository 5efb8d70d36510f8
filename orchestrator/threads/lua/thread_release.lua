-- thread_release: a run that took its thread's turn but was not created gives it back.
-- KEYS    the thread's hash, its runs list, its queued list
-- ARGV    ThreadRelease as JSON (orchestrator/threads/state.py): run_id, at
-- Replies RELEASED      the run left the thread
--         NOT_CURRENT   another run has the turn (nothing changes)
-- Effects the run leaves the runs list; current = the run before it (none: unset).
-- @include reply
local thread, runs = KEYS[1], KEYS[2]
local A = cjson.decode(ARGV[1])
if redis.call('HGET', thread, 'current') ~= A.run_id then return reply('not_current') end
redis.call('LREM', runs, -1, A.run_id)
local before = redis.call('LINDEX', runs, -1)
if before then
  redis.call('HSET', thread, 'current', before)
else
  redis.call('HDEL', thread, 'current')
end
return reply('released')
