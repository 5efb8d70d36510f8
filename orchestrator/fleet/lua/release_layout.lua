-- release_layout: the fleet's state layout let go by the last worker of it to stop.
-- KEYS    [1] the fleet's layout (`aq:layout`).
-- ARGV    [1] the stopping worker's layout.
-- Replies 1 deleted, 0 another layout's or gone.
-- Effects the key deleted when it holds ARGV[1].
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
