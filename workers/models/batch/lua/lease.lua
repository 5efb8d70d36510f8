-- lease: a group's collector lease, taken or renewed.
-- KEYS    [1] the group's lease.
-- ARGV    [1] the owner, [2] the lease ms.
-- Replies 1 held, 0 held by another.
-- Effects the lease key, its TTL.
local holder = redis.call('GET', KEYS[1])
if holder and holder ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
