-- clock: Redis's own time, so that the callers' clocks do not matter.
-- Needs: nothing.
-- Defines: now_ms() -> milliseconds since the epoch, by the server's clock (TIME).
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
