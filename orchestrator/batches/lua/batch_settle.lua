-- batch_settle: an admission job. Record the end of a line's run (when it carries one),
-- then admit the batch's lines up to its concurrency and its tenant's cap (the cap's
-- freed places first to the batches waiting for one: prelude admit).
-- KEYS    sched, waiting, index (see batch/prelude)
-- ARGV    BatchSettle: batch_id, token (the job's id), by (the job's envelope, none for
--         a sweeper's own settle), token_ttl_s, line, run_id, record (the ended line's
--         compact record), ended_at (when its run ended)
-- Replies SETTLED {admitted[{batch_id, line, run_id, spec, priority}]}
--         DUPLICATE {admitted}  the token was settled before (a re-delivered job): the
--                   same admissions again, so their runs are created (idempotently)
-- Effects the line's record, counts and usage (only if the record still names that
--         run as running: a stale end changes nothing), the line leaves the moving
--         index; the batch is done when every line ended; per admitted line: attempt
--         + 1, its run id, status running, the job that admitted it (`by`), counts, an
--         entry in the moving index (and the batch's while it has lines to admit); the
--         token's admissions (kept token_ttl_s); admission latency.
local tok = base .. BK.TOKEN .. A.token
local prior = redis.call('GET', tok)
local admitted, outcome
if prior then
  admitted, outcome = cjson.decode(prior), BOUT.DUPLICATE
else
  local m = bkey(A.batch_id)
  if A.line then
    local recs = bkey(A.batch_id, BK.RECORDS)
    local raw = redis.call('HGET', recs, A.line)
    local rec = raw and cjson.decode(raw)
    if rec and rec[RF.RUN_ID] == A.run_id and rec[RF.STATUS] == LINE.RUNNING then
      for k, v in pairs(A.record) do rec[k] = v end
      rec[RF.ADMITTED_BY] = nil
      redis.call('HSET', recs, A.line, cjson.encode(rec))
      redis.call('SREM', bkey(A.batch_id, BK.RUNNING), A.run_id)
      settled(A.batch_id, A.line)
      redis.call('HINCRBY', m, LINE.RUNNING, -1)
      redis.call('HINCRBY', m, rec[RF.STATUS], 1)
      redis.call('HINCRBY', m, BF.INFLIGHT, -1)
      redis.call('HINCRBY', sched, SF.INFLIGHT, -1)
      local u = rec[RF.USAGE]
      if type(u) == 'table' then
        redis.call('HINCRBY', m, BF.USAGE_INPUT, num(u.input_tokens))
        redis.call('HINCRBY', m, BF.USAGE_OUTPUT, num(u.output_tokens))
        redis.call('HINCRBY', m, BF.USAGE_TOTAL, num(u.total_tokens))
        -- A line whose cost is unknown (a model without a price) makes the batch's so.
        if u.cost_usd == nil or u.cost_usd == cjson.null then
          redis.call('HINCRBY', m, BF.UNPRICED, 1)
        elseif num(u.cost_usd) ~= 0 then
          redis.call('HINCRBYFLOAT', m, BF.COST, tostring(u.cost_usd))
        end
      end
      redis.call('HSET', m, BF.LAST_END_AT, A.at)
      finish_if_done(A.batch_id)
    end
  end
  admitted = admit()
  if A.ended_at and #admitted > 0 and redis.call('EXISTS', m) == 1 then
    local latency = math.max(0, A.at - A.ended_at)
    redis.call('HINCRBYFLOAT', m, BF.ADMIT_LATENCY_SUM, latency)
    redis.call('HINCRBY', m, BF.ADMIT_LATENCY_N, 1)
    if latency > num(redis.call('HGET', m, BF.ADMIT_LATENCY_MAX)) then
      redis.call('HSET', m, BF.ADMIT_LATENCY_MAX, latency)
    end
  end
  redis.call('SET', tok, cjson.encode(admitted), 'EX', A.token_ttl_s)
  outcome = BOUT.SETTLED
end
for _, a in ipairs(admitted) do
  a.spec = redis.call('HGET', bkey(a.batch_id, BK.SPECS), a.line) or ''
  a.priority = tonumber(redis.call('HGET', bkey(a.batch_id), BF.PRIORITY)) or 1
end
return reply(outcome, {admitted = admitted})
