-- thread_turn: a run takes its thread's turn: it becomes the thread's current run.
-- KEYS    the thread's hash, its runs list (one slot: the thread's tag)
-- ARGV    ThreadTurn as JSON (orchestrator/threads/state.py): tenant, run_id, expected
--         (the current run the caller judged ended, '' for none), at, retention_s
-- Replies TAKEN            the run is the thread's current run now
--         SAME             it was already (the same run submitted again)
--         MOVED {current}  another run took the turn since the caller looked
-- Effects current = the run, updated_at (tenant and created_at the first time); the run
--         appended to the runs list; both keys expire a retention after this turn.
-- @include reply
local thread, runs = KEYS[1], KEYS[2]
local A = cjson.decode(ARGV[1])
local current = redis.call('HGET', thread, 'current') or ''
if current == A.run_id then return reply('same') end
if current ~= A.expected then return reply('moved', {current = current}) end
redis.call('HSETNX', thread, 'tenant', A.tenant)
redis.call('HSETNX', thread, 'created_at', A.at)
redis.call('HSET', thread, 'current', A.run_id, 'updated_at', A.at)
redis.call('RPUSH', runs, A.run_id)
redis.call('EXPIRE', thread, A.retention_s)
redis.call('EXPIRE', runs, A.retention_s)
return reply('taken')
