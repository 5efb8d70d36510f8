"""How runs are named and linked: the tenant's namespace a chosen id lives in, a child
run's id, derived from its parent's call, and the trace and span ids every process
derives from a run's id alone (no lookup).

Vocabulary: the spec checks a run id against it, tracing derives ids from it, the runs'
state machine names children with it.
"""

from __future__ import annotations

import hashlib
import re
import secrets

from pydantic import BaseModel, ConfigDict, Field

# The tenant of a run submitted without one (no API keys, the CLI, the Python API).
DEFAULT_TENANT = "default"

# A run id a tenant chose (a spec's `id`, an idempotency key's, a batch's lines') lives in
# that tenant's namespace: `n<12 hex of the tenant>.<the id>`, so that two tenants' ids
# never meet, and no tenant takes an id another will use or learns that another used it.
# The default tenant's ids are as given (one tenant has no one to meet); a spec may not
# choose this shape, so the default tenant cannot take another's either.
TENANT_RUN_ID = re.compile(r"^n[0-9a-f]{12}\.")


# A run with a concurrency key (orchestrator/concurrency/) is placed beside the key's
# counter: its id starts `c<12 hex of the tenant and key>.`, and the partition of such an
# id is that prefix's (`keys.partition_of`), so all runs of one key share a partition
# and the claim checks the key in the slot it takes the job from. A spec may not choose
# this shape either.
PLACED_RUN_ID = re.compile(r"^c[0-9a-f]{12}\.")


def placement(tenant: str | None, key: str) -> str:
    """The prefix of the ids of `tenant`'s runs under concurrency key `key`."""
    owned = f"{tenant or DEFAULT_TENANT}\0{key}"
    return f"c{hashlib.sha256(owned.encode()).hexdigest()[:12]}."


def tenant_run_id(tenant: str | None, chosen: str) -> str:
    """The run id of the id `chosen` by `tenant`."""
    if tenant is None or tenant == DEFAULT_TENANT:
        return chosen
    return f"n{hashlib.sha256(tenant.encode()).hexdigest()[:12]}.{chosen}"


class ParentLink(BaseModel):
    """The parent's call a child run answers (or, with `node`, the node of the parent's
    workflow call whose outcome it gives)."""

    model_config = ConfigDict(extra="forbid")

    run_id: str
    step: int
    call_id: str
    node: str | None = Field(default=None, exclude_if=lambda value: value is None)

    @property
    def child_id(self) -> str:
        """The id of the child run it links (a node's: one per node of the call)."""
        call = self.call_id if self.node is None else f"{self.call_id}\0{self.node}"
        return child_run_id(self.run_id, self.step, call)


# A child run's id: `t<its trace id>.<digest of the parent's call>`. Its trace id is its
# top run's, so every process puts the child's spans in the parent's trace without a
# lookup (tracing derives a run's ids from its id alone); a spec may not choose one.
CHILD_RUN_ID = re.compile(r"^t(?P<trace>[0-9a-f]{32})\.(?P<digest>[0-9a-f]{16})$")


def run_trace_id(run_id: str) -> int:
    """The id of the trace a run's spans belong to: its own, or (a child) its top run's."""
    child = CHILD_RUN_ID.match(run_id)
    if child is not None:
        return int(child["trace"], 16)
    return int.from_bytes(hashlib.sha256(run_id.encode()).digest()[:16], "big") or 1


def traced_run_id(trace_id: int) -> str:
    """A new top run's id in a caller's trace: the form a child's id has (reserved: no
    spec may name one), so that every process derives the caller's trace from it."""
    return f"t{trace_id:032x}.{secrets.token_hex(8)}"


def child_run_id(parent_run_id: str, step: int, call_id: str) -> str:
    """The child's id, derived from the parent's call: starting it twice is a no-op."""
    digest = hashlib.sha256(f"{parent_run_id}\0{step}\0{call_id}".encode()).hexdigest()[:16]
    return f"t{run_trace_id(parent_run_id):032x}.{digest}"


def call_span_id(run_id: str, call_id: str) -> int:
    """The span id of a sub-agent call (`execute_tool`), the parent of its child's run span."""
    digest = hashlib.sha256(f"{run_id}\0call\0{call_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") or 1


def call_idempotency_key(run_id: str, step: int, call_id: str) -> str:
    """The key a side-effecting tool dedupes on: the same for every delivery of one call
    (a re-delivery after its worker died, a lapsed lease), different for any other call.
    The step is part of it because a model may reuse a call id in a later step; the run
    id already carries the tenant's namespace."""
    return hashlib.sha256(f"{run_id}\0{step}\0{call_id}".encode()).hexdigest()[:32]
