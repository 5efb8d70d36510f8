"""The fault tier: real redis-server and `agentq worker` processes, real SIGKILL,
SIGSTOP and restarts, driven through the public CLI and Client.

Every test here carries the `faults` marker; skip the tier locally with
`python -m pytest -m "not faults"`. Figures are printed (run with `-s` to see
them) as lines starting with `FAULTS`.
"""
