-- batch_redrive: the sweeper found an entry of the moving index unmoved for a while. A
-- batch with lines to admit: a new kick where the batch could admit and its last kick is
-- not in hand (it was lost). An admitted line: the kick that admitted it, again unless in
-- hand, when its run was never created (the sweeper re-drives an admitting end job and a
-- line's own end job in their runs' slots, runs/lua/redrive.lua). Job ids are fixed by
-- what they do, so a job that survived is not doubled.
-- KEYS    sched, waiting, index (see batch/prelude)
-- ARGV    BatchRedrive: batch_id, entry, line, run_id (the line's run as the sweeper
--         read it), job (a batch: the new kick; a line: its admitting kick)
-- Replies REDRIVEN {jobs}  a job enqueued; the entry is scored as moved now
--         IN_HAND          nothing lost (or no room to admit); scored as moved now
--         STALE            the line was admitted again since the sweeper read it
--         CLOSED           nothing left to drive: the entry leaves the index
-- Effects the job enqueued (a batch's new kick kept as its kick); the entry's score.
local m = bkey(A.batch_id)

local function rescored(jobs)
  redis.call('ZADD', moving_key, now_ms(), A.entry)
  if jobs > 0 then return reply(BOUT.REDRIVEN, {jobs = jobs}) end
  return reply(BOUT.IN_HAND)
end

local function unless_held(job)
  if not job or held(job.job_id) then return 0 end
  return enqueue(job)
end

if A.line then
  local raw = redis.call('HGET', bkey(A.batch_id, BK.RECORDS), A.line)
  local rec = raw and cjson.decode(raw)
  if not rec or rec[RF.STATUS] ~= LINE.RUNNING then
    redis.call('ZREM', moving_key, A.entry)
    return reply(BOUT.CLOSED)
  end
  if rec[RF.RUN_ID] ~= A.run_id then return reply(BOUT.STALE) end
  return rescored(unless_held(A.job))
end

local v = redis.call('HMGET', m, BF.STATUS, LINE.QUEUED, BF.INFLIGHT, BF.CONCURRENCY, BF.KICK)
if v[1] ~= BATCH.RUNNING or num(v[2]) == 0 then
  redis.call('ZREM', moving_key, A.entry)
  return reply(BOUT.CLOSED)
end
local cap = A.tenant_cap
local room = num(v[3]) < num(v[4])
  and (cap <= 0 or num(redis.call('HGET', sched, SF.INFLIGHT)) + A.others_in_flight < cap)
if not room or (v[5] and held(cjson.decode(v[5]).job_id)) then return rescored(0) end
redis.call('HSET', m, BF.KICK, cjson.encode(A.job))
return rescored(enqueue(A.job))
