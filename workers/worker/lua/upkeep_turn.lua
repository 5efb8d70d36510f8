-- upkeep_turn: the fleet's upkeep turn, taken when free and kept by its holder
--   (workers/worker/upkeep.py); carried by each process's lease renewals.
-- KEYS    [1] the turn.
-- ARGV    [1] the worker process, [2] how long the turn lasts unrenewed (ms).
-- Replies 1 the turn is this process's (taken or kept), else 0.
-- Effects the turn's holder and TTL.
local holder = redis.call('GET', KEYS[1])
if holder and holder ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
