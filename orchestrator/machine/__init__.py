"""The transition kit every state machine shares: keys and partitions, the Store base
(store.py), the Lua loader and the helpers scripts include (scripts.py, lua/), the
constants rendered for Lua, queued jobs."""
