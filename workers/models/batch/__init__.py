"""Provider batch APIs for model steps that can wait (`"model": {..., "batch": true}`).

    step.py       the model step's side: park the request, later take the answer
    store.py      the Redis records: parked requests, groups, batches, leases
    collector.py  the loop in every model worker that submits and polls batches

A step parks its exact direct request (HttpProvider.batch_request) and its job
ends: no worker slot is held while the provider works. A collector groups the
parked requests per endpoint, model and key, submits them, polls, stores each
answer beside its step and re-enqueues the step's model job, which parses the
answer as a direct answer and commits through the same transition.
"""
