-- emit: append events to a machine's event stream.
-- Needs: the prelude's locals `events` (the stream's key), `seq_hash` and `seq_field`
--   (the hash field that counts the stream's events).
-- Defines: emit(ev) -> its sequence number; emit_all(list) (a nil list emits nothing;
--   the list's numbers are taken in one count).
-- The event's sequence number is its stream id, so readers resume without gaps.
local function emit(ev)
  local seq = redis.call('HINCRBY', seq_hash, seq_field, 1)
  redis.call('XADD', events, '0-' .. seq, 'e', ev)
  return seq
end

local function emit_all(list)
  if not list or #list == 0 then return end
  local first = redis.call('HINCRBY', seq_hash, seq_field, #list) - #list
  for i, ev in ipairs(list) do redis.call('XADD', events, '0-' .. (first + i), 'e', ev) end
end
