-- rate_backoff: the quota's shared back-off, extended, never shortened (a provider said
--   to wait).
-- KEYS    [1] the quota's key prefix.
-- ARGV    [1] seconds.
-- Replies the back-off's end (ms, Redis's clock).
-- Effects the back-off key, expiring a second after it ends.
-- @include clock

local now = now_ms()
local target = now + math.floor(tonumber(ARGV[1]) * 1000)
local current = tonumber(redis.call('GET', KEYS[1] .. ':backoff') or '0')
if target > current then
  redis.call('SET', KEYS[1] .. ':backoff', target, 'PX', target - now + 1000)
end
return target
