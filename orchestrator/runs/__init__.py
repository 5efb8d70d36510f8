"""The run state machine: its declared state, store, transitions, Lua scripts."""
