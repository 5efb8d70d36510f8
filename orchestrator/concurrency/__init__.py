"""Concurrency keys: at most `max` runs of one key hold a running job at once, fleet-wide.

A spec's `concurrency` names a key (or a JMESPath over its metadata that gives one) and
a max (`spec.py`). The key lives in its tenant's namespace and its runs are placed in
one partition (`core/run_ids.py: placement`), beside the key's counter, so the claim
(`workers/queue/lua/take.lua`, with `orchestrator/machine/lua/conc.lua`) checks and
counts the key in the one slot it takes the job from: no scheduler process.

What "holds" means: a run holds a slot of its key while at least one of its jobs is
running (claimed and not ended); its parallel tool calls share the one slot. A job of a
run without a slot, while the key is at its max, leaves its lane for the key's wait set
and comes back to its lane when a slot frees; it never blocks other keys' jobs.
"""
