"""Tenant-wide caps a deployment sets (`AGENTQ_TENANT_LIMITS`): how many runs a tenant may
have in flight (created, not ended) and queued (created, first step not begun yet).

    AGENTQ_TENANT_LIMITS='{"*": {"max_in_flight": 50, "max_queued": 200},
                           "acme": {"max_in_flight": 500}}'

A tenant's own entry replaces `*` whole (an entry without a cap has none); a tenant with
neither is not counted at all.

Where the counts live, and why they stay exact: the run's `create` transition checks and
raises them, its first `begin_step` moves the run from queued to in flight only, and
`finish_run` (every end: success, failure, cancel, a worker's deaths past
AGENTQ_MAX_DELIVERIES) lowers them, each in the same Lua transition as the change it counts.
The run's meta records which tenant it was counted under (`MetaField.LOAD_TENANT`), so
an end lowers exactly what its create raised, once (an ended run's transitions are
refused), whatever the settings say by then. A re-delivered job finds its transition
applied and counts nothing twice.

Redis Cluster: a transition touches one slot, the run's partition's. So the counts are
kept per partition (`keys.tenant_load`, a hash in the partition's slot: `i:<tenant>`,
`q:<tenant>`), and a create checks its own partition's count atomically plus the other
partitions' counts read just before (`Runs` sums them). With one partition (any single
Redis) the cap is exact; with N, two creates racing in different partitions may both see
room, so the cap can be overshot by the creates in flight at that instant, never drift:
the counts themselves are exact, and the next create sees the truth.

Who is refused: a run submitted by the tenant (Python API, CLI, HTTP, a thread's turn, a
run queued on a thread: it is created, `queued`, when it is submitted) gets
`TenantLimitError` (HTTP 429 naming `tenant_max_in_flight` or `tenant_max_queued`).
A batch's lines, sub-agents' child runs, a thread's run that interrupts the one going on
and a schedule's tick (any run created under an id already derived) are counted but never
refused: a batch's admission already holds its lines back (within the batch's concurrency
and the tenant's max_in_flight), a child's parent is already in flight, an interrupting
run replaces one that ends at its step's end, and a tick was accepted with its schedule
(refusing it now would lose it). A delayed run counts as queued until it starts.
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict, Field

# The entry of every tenant that has none of its own.
ANY_TENANT = "*"
# What a refusal's Retry-After says: a run's end frees a slot, so a short wait.
RETRY_AFTER_S = 1
# The limits a refusal names (the 429's `limit`).
MAX_IN_FLIGHT = "tenant_max_in_flight"
MAX_QUEUED = "tenant_max_queued"


class TenantLimit(BaseModel):
    """One tenant's caps (None: no cap)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_in_flight: int | None = Field(default=None, ge=1)
    max_queued: int | None = Field(default=None, ge=1)


def limit_for(limits: Mapping[str, TenantLimit], tenant: str) -> TenantLimit | None:
    """The tenant's caps: its own entry, else `*`, else none (not counted)."""
    return limits.get(tenant, limits.get(ANY_TENANT))


class TenantLoad(BaseModel):
    """What `create` counts a run under and checks (CreateRun.tenant_load): the tenant, its
    caps, the other partitions' counts, and whether the run may be refused at all."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tenant: str
    max_in_flight: int | None = None
    max_queued: int | None = None
    # The tenant's other runs in flight: other partitions', and its batches' lines (the
    # batch admission counts those, `keys.batch_sched`), read just before.
    others_in_flight: int = 0
    others_queued: int = 0
    enforce: bool = True
    # A batch's line: in flight in its batches' count (admitted there), so not counted in
    # flight here again; queued here as any run.
    batch_line: bool = False
