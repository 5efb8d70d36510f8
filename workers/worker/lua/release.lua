-- release: a lock let go, only by its holder.
-- KEYS    [1] the lock.
-- ARGV    [1] its holder.
-- Replies 1 deleted, 0 held by another or gone.
-- Effects the lock deleted.
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
