-- park: a step's request joins its group's queue, once.
-- KEYS    [1] the group's known set, [2] its pending queue (a zset by when it joined).
-- ARGV    [1] the member (run and step), [2] now ms.
-- Replies 1 joined, 0 known already (a re-delivered model job parks nothing twice).
-- Effects the member known and pending.
if redis.call('SADD', KEYS[1], ARGV[1]) == 0 then return 0 end
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[1])
return 1
