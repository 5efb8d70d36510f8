-- start_queued: a run queued on its thread starts: its thread's turn has come.
-- KEYS    meta, msgs, events (see prelude)
-- ARGV    StartQueued: history (the thread's history, message JSON, oldest first)
-- Replies STARTED
--         DUPLICATE    it had started already (a re-delivered start)
--         CLOSED       it ended while it waited (cancelled)
--         UNKNOWN_RUN
-- Effects the history before the run's own messages (counted among its initial ones),
--         status running, its held model job of step 0 enqueued, the run scored in the
--         moving index.
local status = redis.call('HGET', meta, F.STATUS)
if not status then return reply(OUT.UNKNOWN_RUN) end
if is_terminal(status) then return reply(OUT.CLOSED) end
if status ~= RUN.QUEUED then return reply(OUT.DUPLICATE) end
for i = #A.history, 1, -1 do redis.call('LPUSH', msgs, A.history[i]) end
redis.call('HINCRBY', meta, F.N_INITIAL, #A.history)
redis.call('HSET', meta, F.STATUS, RUN.RUNNING)
enqueue_run_job(cjson.decode(redis.call('HGET', meta, F.HELD_JOB)))
redis.call('HDEL', meta, F.HELD_JOB)
moved()
return reply(OUT.STARTED)
