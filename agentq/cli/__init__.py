"""The `agentq` command line: one module per command group."""
