"""The vocabulary every other package speaks: the run spec, messages, events, errors,
settings, job envelopes. Imports nothing else of agentq."""
