-- batch_open: make a batch (uploading), or find the one an interrupted upload left.
-- KEYS    sched, waiting, index (see batch/prelude)
-- ARGV    BatchOpen: batch_id, tenant, run_prefix, concurrency, priority, metadata,
--         retention_s, upload_ttl_s (an unsealed batch's expiry, refreshed by a resume)
-- Replies OPENED {status}
--         RESUMED {status, lines}  the batch is still uploading: continue its upload
--         EXISTS {status, lines}   the batch was sealed before: nothing to upload
-- Effects the batch's meta hash (status uploading, counts 0), the tenant's index; the
--         batch's keys expire in upload_ttl_s unless sealed.
local m = bkey(A.batch_id)
local st = redis.call('HGET', m, BF.STATUS)
if st then
  local n = num(redis.call('HGET', m, BF.LINES))
  if st == BATCH.UPLOADING then
    expire_upload(A.batch_id, A.upload_ttl_s)
    return reply(BOUT.RESUMED, {status = st, lines = n})
  end
  return reply(BOUT.EXISTS, {status = st, lines = n})
end
redis.call('HSET', m, BF.ID, A.batch_id, BF.TENANT, A.tenant, BF.STATUS, BATCH.UPLOADING,
           BF.CONCURRENCY, A.concurrency, BF.PRIORITY, A.priority,
           BF.RUN_PREFIX, A.run_prefix,
           BF.METADATA, A.metadata, BF.RETENTION_S, A.retention_s, BF.LINES, 0,
           BF.INFLIGHT, 0, BF.CREATED_AT, A.at,
           BF.USAGE_INPUT, 0, BF.USAGE_OUTPUT, 0, BF.USAGE_TOTAL, 0)
for _, s in pairs(LINE) do redis.call('HSET', m, s, 0) end
expire_upload(A.batch_id, A.upload_ttl_s)
redis.call('ZADD', index, A.at, A.batch_id)
return reply(BOUT.OPENED, {status = BATCH.UPLOADING})
