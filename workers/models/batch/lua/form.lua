-- form: when the group's queue is full enough or old enough, its oldest members become a
--   new batch, before anything is uploaded (after a crash they are in exactly one batch).
-- KEYS    [1] the pending queue, [2] the group's in-flight batch set, [3] the new batch's
--         record.
-- ARGV    [1] the batch id, [2] max members, [3] max age ms, [4] now ms.
-- Replies the members (JSON), or nil when no batch is due.
-- Effects the members leave the queue; the batch record (state new) and its id in flight.
local n = redis.call('ZCARD', KEYS[1])
if n == 0 then return false end
local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
if n < tonumber(ARGV[2]) and tonumber(ARGV[4]) - tonumber(oldest[2]) < tonumber(ARGV[3]) then
  return false
end
local members = redis.call('ZRANGE', KEYS[1], 0, tonumber(ARGV[2]) - 1)
redis.call('ZREM', KEYS[1], unpack(members))
redis.call('HSET', KEYS[3], 'members', cjson.encode(members), 'state', 'new', 'at', ARGV[4])
redis.call('SADD', KEYS[2], ARGV[1])
return cjson.encode(members)
