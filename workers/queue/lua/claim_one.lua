-- claim_one: one given job, for a holder that picks its job itself (a remote service's
--   lease, which sets its liveness key just before).
-- KEYS    in-progress key, queue, holder's jobs hash, holders set (the job's partition's).
-- ARGV    [1] job id, [2] now ms, [3] holder id, [4] lease record prefix, [5] backstop ms,
--         [6] the offset of a job's score in its lane (fairness.INDEXED_OFFSET_MS),
--         [7] arq's job key prefix.
-- Replies the job's score, or nil when it is held, gone or not due.
-- Effects the job's in-progress key, its score +inf, its lease record (the time it was
--         due, not its lane's score: core/fairness.py), the holder listed; its lane
--         entry is left for the claim to drop. A job of a run with a concurrency key is
--         taken only while its run holds a slot or the key has one free, as the claim
--         takes one (conc.lua: conc_claim; the record names the key's counter and run,
--         so the lease's end or its reaper frees the slot); else it is held for the key
--         and stays in the queue, ready.
-- @include conc
if redis.call('EXISTS', KEYS[1]) == 1 then return false end
local score = redis.call('ZSCORE', KEYS[2], ARGV[1])
if not score or tonumber(score) > tonumber(ARGV[2]) then return false end
if tonumber(score) < 0 then score = string.format('%.17g', tonumber(score) + ARGV[6]) end
local lease = conc_claim(KEYS[2], ARGV[1], score, redis.call('GET', ARGV[7] .. ARGV[1]))
if not lease then return false end
redis.call('SET', KEYS[1], ARGV[3], 'PX', ARGV[5])
redis.call('ZADD', KEYS[2], '+inf', ARGV[1])
redis.call('HSET', KEYS[3], ARGV[1], ARGV[4] .. score .. lease .. '}')
redis.call('SADD', KEYS[4], ARGV[3])
return score
