-- wake: a token on a queue's wake-up list, for one sleeping worker (BLPOP) to take.
-- Needs: nothing.
-- Defines: wake(key). The list is a hint of ready work: it keeps at most 64 tokens.
local function wake(key)
  -- Trimmed only past its bound: a command less on nearly every enqueue.
  if redis.call('LPUSH', key, '1') > 64 then redis.call('LTRIM', key, 0, 63) end
end
