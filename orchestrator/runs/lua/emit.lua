-- emit: append events to a live run (text deltas, progress, repairs).
-- KEYS    meta, msgs, events (see prelude)
-- ARGV    Emit: events, after_end (append to an ended run too: delivery reports)
-- Replies EMITTED {seq}  the last event's sequence number
--         UNKNOWN_RUN | CLOSED  (nothing appended)
-- Effects the events.
local status = redis.call('HGET', meta, F.STATUS)
if not status then return reply(OUT.UNKNOWN_RUN) end
if is_terminal(status) and not A.after_end then return reply(OUT.CLOSED) end
local seq = 0
for _, ev in ipairs(A.events) do seq = emit(ev) end
return reply(OUT.EMITTED, {seq = seq})
