-- rate_correct: a ticket's tokens corrected to what the call really used.
-- KEYS    [1] the quota's key prefix.
-- ARGV    [1] the ticket, [2] tokens to add (may be negative).
-- Replies 1, or 0 (a no-op) once the ticket has left the window.
-- Effects the ticket's tokens and the spent sum.
local spent = KEYS[1] .. ':spent'
if redis.call('HEXISTS', spent, ARGV[1]) == 0 then return 0 end
redis.call('HINCRBY', spent, ARGV[1], ARGV[2])
redis.call('INCRBY', KEYS[1] .. ':spent-sum', ARGV[2])
return 1
