"""The transition kit every state machine shares: keys and partitions, the
constants rendered for Lua, queued jobs."""
