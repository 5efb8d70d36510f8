-- Append events to a live run (deltas, progress). Returns the last seq, or 0 if closed.
local status = redis.call('HGET', meta, 'status')
if not status or is_terminal(status) then return 0 end
local seq = 0
for _, ev in ipairs(A.events) do seq = emit(ev) end
return seq
