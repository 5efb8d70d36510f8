"""Tool calls without a run: their catalogue, state, store, client API, Lua."""
