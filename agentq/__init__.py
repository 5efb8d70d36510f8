"""agentq's composition root: the CLI and the wiring of orchestrator and workers.

`orchestrator` must not import `workers`; the CLI needs both (`agentq run`
starts in-process workers, `agentq worker` is one), so it lives here.
"""
