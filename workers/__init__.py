"""agentq's executing half: the worker process, job kinds, tool executors and model clients.

Nothing is re-exported here (the public face is `agentq`: `from agentq import tool`).
"""
