#!lua
-- admit: whether Redis takes writes now, asked before a run is created.
-- KEYS none.
-- ARGV none.
-- Replies 1; Redis 7 refuses the script itself (OOM) while it is over its maxmemory,
--   because the shebang (no `no-writes` flag) says it may write: the create transition
--   would be let through, its first write being a DEL.
-- Effects none.
return 1
