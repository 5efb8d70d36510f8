-- reap_gate: whether this reaper pass looks at the workers (`reap_lapsed`). After a gap
--   (Redis itself was stopped, restarted or unreachable) every lease may have lapsed at
--   once, live workers' too: nothing is reaped until the live ones have had time to renew.
-- KEYS    [1] a hash: when a reaper last passed, since when passes have come without a
--         gap, and when one last looked at the workers (Redis's own clock, ms).
-- ARGV    [1] the longest gap between passes that still counts as steady, [2] how long
--         passes must have been steady, [3] how long after another reaper's look this
--         pass looks again (every process of a fleet passes; one look per period is
--         enough).
-- Replies 1 when this pass looks at the workers, else 0.
-- Effects the hash's times.
-- @include clock

local now = now_ms()
local state = redis.call('HMGET', KEYS[1], 'last', 'since', 'looked')
local last = tonumber(state[1] or '0')
local since = tonumber(state[2] or '0')
if now - last > tonumber(ARGV[1]) then
  since = now
  redis.call('HSET', KEYS[1], 'since', since)
end
redis.call('HSET', KEYS[1], 'last', now)
if now - since < tonumber(ARGV[2]) then return 0 end
if now - tonumber(state[3] or '0') < tonumber(ARGV[3] or '0') then return 0 end
redis.call('HSET', KEYS[1], 'looked', now)
return 1
