-- batch_cancel: no new admissions; the caller cancels the runs still in flight.
-- KEYS    sched, waiting, index (see batch/prelude)
-- ARGV    BatchCancel: batch_id
-- Replies CANCELLED {status, running}  the run ids still in flight, to cancel
--         CLOSED {status, running}     done or cancelled before (running: what is left)
--         UNKNOWN_BATCH
-- Effects status cancelled, every queued line's record cancelled, the pending list
--         emptied, the batch leaves the waiting batches and the moving index (its running lines
--         stay there until they end); done at once if nothing runs.
local m = bkey(A.batch_id)
local st = redis.call('HGET', m, BF.STATUS)
if not st then return reply(BOUT.UNKNOWN_BATCH) end
local running = redis.call('SMEMBERS', bkey(A.batch_id, BK.RUNNING))
if st == BATCH.DONE or st == BATCH.CANCELLED then
  return reply(BOUT.CLOSED, {status = st, running = running})
end
redis.call('HSET', m, BF.STATUS, BATCH.CANCELLED)
local pending, recs = bkey(A.batch_id, BK.PENDING), bkey(A.batch_id, BK.RECORDS)
local lines = redis.call('LRANGE', pending, 0, -1)
for _, line in ipairs(lines) do
  local rec = cjson.decode(redis.call('HGET', recs, line))
  rec[RF.STATUS] = LINE.CANCELLED
  redis.call('HSET', recs, line, cjson.encode(rec))
end
redis.call('HINCRBY', m, LINE.QUEUED, -#lines)
redis.call('HINCRBY', m, LINE.CANCELLED, #lines)
redis.call('DEL', pending)
redis.call('ZREM', waiting, A.batch_id)
settled(A.batch_id)
finish_if_done(A.batch_id)
return reply(BOUT.CANCELLED, {status = BATCH.CANCELLED, running = running})
