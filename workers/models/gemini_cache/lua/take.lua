-- take: the batch's cached contents, removed, for the one worker that deletes them.
-- KEYS    [1] the batch's hash of cached contents (digest -> entry).
-- ARGV    none.
-- Replies the hash's fields and values, flat ({} when another worker took them).
-- Effects the hash deleted.
local entries = redis.call('HGETALL', KEYS[1])
redis.call('DEL', KEYS[1])
return entries
