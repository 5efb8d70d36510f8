-- batch_retry: requeue the lines in [first, last] that ended in one of `statuses`; each
-- gets a new run (its attempt + 1) when admitted.
-- KEYS    sched, waiting, index (see batch/prelude)
-- ARGV    BatchRetry: batch_id, first, last, statuses, kick (optional QueuedJob)
-- Replies REQUEUED {status, requeued}
--         CLOSED {status}  the batch is still uploading
--         UNKNOWN_BATCH
-- Effects per requeued line: record queued (result cleared), counts, pending += line;
--         if any: status running, the retention lifted; the kick job (an admission) when given, kept as the batch's kick, and the batch
--         (re)enters the moving index.
local m = bkey(A.batch_id)
local st = redis.call('HGET', m, BF.STATUS)
if not st then return reply(BOUT.UNKNOWN_BATCH) end
if st == BATCH.UPLOADING then return reply(BOUT.CLOSED, {status = st}) end
local wanted = {}
for _, s in ipairs(A.statuses) do wanted[s] = true end
local recs, pending = bkey(A.batch_id, BK.RECORDS), bkey(A.batch_id, BK.PENDING)
local n = 0
for line = A.first, A.last do
  local raw = redis.call('HGET', recs, line)
  if raw then
    local rec = cjson.decode(raw)
    if wanted[rec[RF.STATUS]] then
      redis.call('HINCRBY', m, rec[RF.STATUS], -1)
      rec[RF.STATUS], rec[RF.TEXT], rec[RF.ERROR], rec[RF.USAGE] = LINE.QUEUED, nil, nil, nil
      rec[RF.OUTPUT] = nil
      redis.call('HSET', recs, line, cjson.encode(rec))
      redis.call('RPUSH', pending, line)
      n = n + 1
    end
  end
end
if n > 0 then
  redis.call('HINCRBY', m, LINE.QUEUED, n)
  redis.call('HSET', m, BF.STATUS, BATCH.RUNNING)
  redis.call('HDEL', m, BF.FINISHED_AT)
  for _, key in ipairs(batch_keys(A.batch_id)) do redis.call('PERSIST', key) end
end
if A.kick then
  enqueue(A.kick)
  redis.call('HSET', m, BF.KICK, cjson.encode(A.kick))
  moved(A.batch_id)
end
return reply(BOUT.REQUEUED, {status = redis.call('HGET', m, BF.STATUS), requeued = n})
