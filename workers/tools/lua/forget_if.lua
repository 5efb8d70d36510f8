-- forget_if: a session's entry deleted only if it still names the owner found gone (a
--   newer claim by another worker must survive).
-- KEYS    [1] the sessions hash.
-- ARGV    [1] the session, [2] the owner found gone.
-- Replies 1 deleted, else 0.
-- Effects the entry deleted.
if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then
  return redis.call('HDEL', KEYS[1], ARGV[1])
end
return 0
