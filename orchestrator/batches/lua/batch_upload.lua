-- batch_upload: store a chunk of lines; a line whose custom_id is stored is skipped
-- (the same line: a resumed upload) or reported (another line: a duplicate).
-- KEYS    sched, waiting, index (see batch/prelude)
-- ARGV    BatchUpload: batch_id, lines[{line, custom_id, spec, placement}], upload_ttl_s
-- Replies STORED {stored, duplicates[{line, first, custom_id}], lines}
--         UNKNOWN_BATCH | CLOSED {status} (sealed or cancelled: nothing is stored)
-- Effects per new line: ids[custom_id], specs[line], a queued record (with its runs'
--         placement), pending += line;
--         the batch's lines and queued counts, its last line number; its keys' expiry
--         moves to upload_ttl_s from now.
local m = bkey(A.batch_id)
local st = redis.call('HGET', m, BF.STATUS)
if not st then return reply(BOUT.UNKNOWN_BATCH) end
if st ~= BATCH.UPLOADING then return reply(BOUT.CLOSED, {status = st}) end
local ids, specs = bkey(A.batch_id, BK.IDS), bkey(A.batch_id, BK.SPECS)
local recs, pending = bkey(A.batch_id, BK.RECORDS), bkey(A.batch_id, BK.PENDING)
local stored, dups = 0, {}
local last = num(redis.call('HGET', m, BF.LAST_LINE))
for _, l in ipairs(A.lines) do
  local first = redis.call('HGET', ids, l.custom_id)
  if first then
    if tonumber(first) ~= l.line then
      dups[#dups + 1] = {line = l.line, first = tonumber(first), custom_id = l.custom_id}
    end
  else
    redis.call('HSET', ids, l.custom_id, l.line)
    redis.call('HSET', specs, l.line, l.spec)
    local rec = {}
    rec[RF.CUSTOM_ID], rec[RF.STATUS], rec[RF.ATTEMPT] = l.custom_id, LINE.QUEUED, 0
    if l.placement ~= '' then rec[RF.PLACEMENT] = l.placement end
    redis.call('HSET', recs, l.line, cjson.encode(rec))
    redis.call('RPUSH', pending, l.line)
    stored = stored + 1
    if l.line > last then last = l.line end
  end
end
redis.call('HSET', m, BF.LAST_LINE, last)
local n = redis.call('HINCRBY', m, BF.LINES, stored)
redis.call('HINCRBY', m, LINE.QUEUED, stored)
expire_upload(A.batch_id, A.upload_ttl_s)
return reply(BOUT.STORED, {stored = stored, duplicates = dups, lines = n})
