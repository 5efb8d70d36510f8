"""The vocabulary every other package speaks: messages, events, errors, settings, Redis
keys and job ids, job envelopes and the JobKind table, run ids. Imports nothing else of
agentq."""
