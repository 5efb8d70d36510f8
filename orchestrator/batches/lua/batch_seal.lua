-- batch_seal: the upload is complete: the batch starts admitting its lines.
-- KEYS    sched, waiting, index (see batch/prelude)
-- ARGV    BatchSeal: batch_id, lines (how many the submitter read), kick (a QueuedJob)
-- Replies SEALED {status, lines}
--         EXISTS {status, lines}      sealed before (a re-submission): nothing changes
--         INCOMPLETE {status, lines}  the batch holds another number of lines
--         UNKNOWN_BATCH
-- Effects status running, the upload's expiry removed, the kick job (an admission) is
--         enqueued and kept as the batch's kick, the batch enters the moving index; an
--         empty batch is done at once.
local m = bkey(A.batch_id)
local st = redis.call('HGET', m, BF.STATUS)
if not st then return reply(BOUT.UNKNOWN_BATCH) end
local n = num(redis.call('HGET', m, BF.LINES))
if st ~= BATCH.UPLOADING then return reply(BOUT.EXISTS, {status = st, lines = n}) end
if n ~= A.lines then return reply(BOUT.INCOMPLETE, {status = st, lines = n}) end
redis.call('HSET', m, BF.STATUS, BATCH.RUNNING, BF.SEALED_AT, A.at)
expire_upload(A.batch_id, nil)
enqueue(A.kick)
redis.call('HSET', m, BF.KICK, cjson.encode(A.kick))
moved(A.batch_id)
finish_if_done(A.batch_id)
return reply(BOUT.SEALED, {status = redis.call('HGET', m, BF.STATUS), lines = n})
