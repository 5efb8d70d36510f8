-- claim_layout: the fleet's state layout, taken by a worker that starts (or kept by one
-- that beats) unless a worker of another layout holds it.
-- KEYS    [1] the fleet's layout (`aq:layout`).
-- ARGV    [1] the worker's layout; [2] how long the claim lasts without a beat, in ms.
-- Replies the layout the key holds now: ARGV[1] when it was free or already ours.
-- Effects the key set to ARGV[1] for ARGV[2] ms, unless it holds another layout.
local held = redis.call('GET', KEYS[1])
if held and held ~= ARGV[1] then return held end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return ARGV[1]
