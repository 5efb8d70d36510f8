-- publish: the creating worker's outcome for one prefix, and its waiters woken.
-- KEYS    [1] the prefix's name, [2] its claim, [3] its waiters' list, [4] the batch's hash
--         of cached contents to delete at its end.
-- ARGV    [1] the name (a cachedContents resource, or "-": none), "" to leave it unset (a
--         failure worth another try), [2] how long it is used, ms, [3] the prefix's digest,
--         [4] its entry in the batch's hash ("" for none), [5] how long that hash is kept, ms.
-- Replies 1.
-- Effects the name set, the claim released, one token on the waiters' list (each waiter
--         pushes it back, so every one of them wakes), the entry recorded.
if ARGV[1] ~= '' then redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2]) end
redis.call('DEL', KEYS[2])
redis.call('DEL', KEYS[3])
redis.call('RPUSH', KEYS[3], '1')
redis.call('PEXPIRE', KEYS[3], ARGV[2])
if ARGV[4] ~= '' then
  redis.call('HSET', KEYS[4], ARGV[3], ARGV[4])
  redis.call('PEXPIRE', KEYS[4], ARGV[5])
end
return 1
