-- renew: a lease kept, only by its holder (a worker's liveness key, a webhook run's lock).
-- KEYS    [1] the lease's key.
-- ARGV    [1] its holder, [2] the lease ms.
-- Replies 1 renewed, 0 the key was gone or held by another.
-- Effects the key's TTL.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
