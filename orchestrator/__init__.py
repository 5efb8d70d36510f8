"""agentq's deciding half: what runs, calls and batches are and how they move.

Nothing is re-exported here, so that importing one module (an error class, the spec)
does not load the client and everything behind it; the public face is `agentq`.
"""
