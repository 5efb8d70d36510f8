-- thread_turn: a run takes its thread's turn: it becomes the thread's current run.
-- KEYS    the thread's hash, its runs list, its queued list (one slot: the thread's tag)
-- ARGV    ThreadTurn as JSON (orchestrator/threads/state.py): tenant, run_id, expected
--         (the current run the caller judged ended, '' for none), discard (rollback: the
--         expected run leaves the thread), queued (the run's request in the queued list,
--         when a queued run starts), at, retention_s
-- Replies TAKEN            the run is the thread's current run now
--         SAME             it was already (the same run submitted again)
--         MOVED {current}  another run took the turn since the caller looked
-- Effects current = the run, updated_at (tenant and created_at the first time); the run
--         appended to the runs list (the expected one removed first with discard); its
--         queued request removed; the keys expire a retention after this turn.
-- @include reply
local thread, runs, queued = KEYS[1], KEYS[2], KEYS[3]
local A = cjson.decode(ARGV[1])
local current = redis.call('HGET', thread, 'current') or ''
if current == A.run_id then
  if A.queued then redis.call('LREM', queued, 1, A.queued) end
  return reply('same')
end
if current ~= A.expected then return reply('moved', {current = current}) end
if A.discard and current ~= '' then redis.call('LREM', runs, -1, current) end
if A.queued then redis.call('LREM', queued, 1, A.queued) end
redis.call('HSETNX', thread, 'tenant', A.tenant)
redis.call('HSETNX', thread, 'created_at', A.at)
redis.call('HSET', thread, 'current', A.run_id, 'updated_at', A.at)
redis.call('RPUSH', runs, A.run_id)
for _, key in ipairs({thread, runs, queued}) do
  redis.call('EXPIRE', key, A.retention_s)
end
return reply('taken')
