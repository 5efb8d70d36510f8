-- emit: append events to a machine's event stream.
-- Needs: the prelude's local `events` (the stream's key).
-- Defines: emit(ev) -> its sequence number; emit_all(list) (a nil list emits nothing).
-- The event's sequence number is its stream id, `0-<seq>`, so readers resume without
-- gaps. Redis numbers it (`0-*`: the stream's last id + 1), so an event is one command
-- and no counter is kept beside the stream: the stream's last id is the count (read it
-- with XREVRANGE). Redis keeps a stream's last id through XTRIM and XDEL; only a DEL of
-- the key starts it again at 1, and a machine's stream goes only with its record (the
-- two expire together; a create deletes a stream it finds without one).
local function emit(ev)
  local id = redis.call('XADD', events, '0-*', 'e', ev)
  return tonumber(string.sub(id, 3))
end

local function emit_all(list)
  if not list then return end
  for _, ev in ipairs(list) do redis.call('XADD', events, '0-*', 'e', ev) end
end
