"""Who is served next: a run's lane (its tenant, the tenant's fairness key, their weights)
and priority.

The claim is the scheduler (workers/queue/lua/take.lua), a two-level deficit round-robin
with a job as the unit: every queue partition keeps a ring of the tenants with ready
work, each tenant a ring of its keys with ready work, and each key (a lane) its ready
jobs in a sorted set by rank. Tenants take turns, `tenant weight` jobs a turn (the
deployment's `AGENTQ_TENANT_WEIGHTS`, default 1); within a tenant's turns its keys take
turns, `weight` jobs a turn (the spec's). So a tenant's keys and weights only divide
that tenant's own share: one with 1,000 keys still gets one tenant's turn, and a spec
may name its key and weight whoever sent it. One tenant's flood never queues another
tenant's run behind it; one batch of a tenant (its lines are the key `batch:<id>`)
never queues the tenant's other runs behind it.

A ring entry is `<jobs left in its turn>|<name>`: only the head of a ring is inside a
turn, so its deficit travels with it and goes when it leaves, and an entry of weight 1
never changes. A turn is as long as the weights of the run whose job starts it (the
claim reads them with the run's concurrency key, in one read of its meta). A ring lists
the names with ready jobs (a lane with entries, a tenant with such a lane), and at its
head at most one name more: the queue's only lane, kept listed by the claim that took its
last job, so that a lone tenant's lane does not leave and rejoin both rings on every job
(the claim that next finds it empty drops it). A listed lane holds its mark
(`LISTED_MEMBER`, after every job), so the enqueue's one write into the lane says whether
it was listed: the enqueue that lists a lane pushes it (and its tenant, if that was its
first), the claim that empties it (or finds it empty) removes it, and nothing else
touches the rings, so an enqueue into a listed lane and a claim that leaves its lane
non-empty write nothing but the lane.

A rank is when the job was due less its run's priority times the aging step: a
higher priority is worth that much waiting, so a `low` job is overtaken only by
`high` jobs due less than (high - low) aging steps after it; steady `high` load
cannot starve it beyond that.

A run stores its lane once, in its meta hash (the `*_FIELD`s); the enqueue and the claim
read it by reference (the job's run id), so a job's payload does not grow.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, field_validator

from agentq.orchestrator.core import keys
from agentq.orchestrator.core.errors import SpecError
from agentq.orchestrator.core.run_ids import DEFAULT_TENANT

PRIORITY_NAMES: dict[str, int] = {"low": 2, "normal": 5, "high": 8}
NORMAL_PRIORITY = PRIORITY_NAMES["normal"]

# A spec's priority: a name, or 0 (lowest) to 9 (highest).
Priority = Literal["low", "normal", "high"] | Annotated[int, Field(ge=0, le=9)]

FAIRNESS_KEY = re.compile(r"^[A-Za-z0-9_.:@-]{1,128}$")
MAX_WEIGHT = 1000
# A weight a spec or the deployment gives.
Weight = Annotated[int, Field(ge=1, le=MAX_WEIGHT)]
# The key of a tenant's runs that name none; no spec can name it (a key has a character).
DEFAULT_KEY = ""
# `AGENTQ_TENANT_WEIGHTS`' entry for every tenant without one of its own.
ANY_TENANT = "*"
# Between a ring entry's jobs left in its turn and its name, and a tenant's name and its
# key in a lane's name (a key never holds it; a tenant may: the key is after the last).
TURN_SEPARATOR = "|"
LANE_SEPARATOR = "/"

# A ready job's score in its queue once it is in its lane: its due time less this, so
# indexed jobs sort below every due time (they stay in arq's ready range, oldest first)
# and the claim's sweep for jobs not yet in a lane, (0, now], never reads them again.
# 2^50 ms is ~35,000 years: every due time stays exact in a double.
INDEXED_OFFSET_MS = 2**50

# A listed lane's mark: a member scored +inf (after every job) that no job id can be.
LISTED_MEMBER = ""
LISTED_SCORE = "+inf"
# The queue's only listed lane's mark: a member scored -inf (before every job) that names
# the lane's tenant and key after this prefix (JSON), so a claim that reads the lane's head
# also learns it need not read the rings (workers/queue/lua/take.lua).
ONLY_PREFIX = "~only"
ONLY_SCORE = "-inf"

# The run meta fields that hold its lane (runs/state/status.py: MetaField).
TENANT_FIELD = "fair_tenant"
KEY_FIELD = "fair_key"
WEIGHT_FIELD = "fair_weight"
TENANT_WEIGHT_FIELD = "fair_tenant_weight"
RANK_FIELD = "fair_rank"


class Fairness(BaseModel):
    """A spec's `fairness`: the key its tenant's runs share a turn under, and its weight
    (a key of weight 3 gets three of its tenant's jobs a turn for one of a key of weight 1)."""

    model_config = ConfigDict(extra="forbid")

    key: str | None = None
    weight: Weight = 1

    @field_validator("key")
    @classmethod
    def _check_key(cls, value: str | None) -> str | None:
        if value is not None and not FAIRNESS_KEY.match(value):
            raise ValueError("a fairness key is 1-128 letters, digits, '_', '.', ':', '@' or '-'")
        return value


class Lane(BaseModel):
    """Where a run's jobs wait: its tenant and the tenant's key, their weights, and the
    rank offset its priority is worth (ms)."""

    model_config = ConfigDict(extra="forbid")

    tenant: str = DEFAULT_TENANT
    key: str = DEFAULT_KEY
    weight: int = 1
    tenant_weight: int = 1
    rank_ms: int = 0


_PRIORITY: TypeAdapter[Priority] = TypeAdapter(Priority)


def checked_priority(value: object) -> Priority:
    """A priority given apart from a spec (an argument, a flag): checked as the spec's is;
    a digit string is its number (a command line's)."""
    if isinstance(value, str) and value.isdigit():
        value = int(value)
    try:
        return _PRIORITY.validate_python(value)
    except ValidationError:
        raise SpecError(f"priority: {value!r} is not low, normal, high or 0-9") from None


def priority_value(priority: Priority | None) -> int:
    if priority is None:
        return NORMAL_PRIORITY
    return PRIORITY_NAMES[priority] if isinstance(priority, str) else priority


def batch_key(batch_id: str) -> str:
    """The key a batch's lines share a turn under, unless a line's spec names its own."""
    return f"batch:{batch_id}"


def lane_of(
    tenant: str | None,
    fairness: Fairness | None,
    priority: Priority | None,
    aging_s: float,
    tenant_weights: Mapping[str, int] | None = None,
    batch_id: str | None = None,
    batch_weight: int = 1,
) -> Lane:
    """A run's lane: its tenant's default key, its batch's, or the key its spec names
    (always the tenant's own), weighted by the spec and the deployment.

    A batch's priority is `batch_weight`: a batch is a key of its own, so between a
    tenant's batches (and its direct runs) a key's weight is what orders them; a
    priority within the key would order nothing, every line having the same. A line
    whose spec names its own `fairness` is weighted by it, as it chose."""
    owner = tenant or DEFAULT_TENANT
    weights = tenant_weights or {}
    key = fairness.key if fairness is not None else None
    if key is None:
        key = batch_key(batch_id) if batch_id is not None else DEFAULT_KEY
    if fairness is not None:
        weight = fairness.weight
    else:
        weight = batch_weight if batch_id is not None else 1
    return Lane(
        tenant=owner,
        key=key,
        weight=weight,
        tenant_weight=weights.get(owner, weights.get(ANY_TENANT, 1)),
        rank_ms=int((priority_value(priority) - NORMAL_PRIORITY) * aging_s * 1000),
    )


def due_of(score: float) -> float:
    """When a queued job was due, from its score in the queue (indexed or not)."""
    return score + INDEXED_OFFSET_MS if score < 0 else score


def lua_chunk() -> str:
    """The constants `orchestrator/machine/lua/fair.lua` reads, as a Lua table."""
    table = {
        "QUEUE_PREFIX": keys.QUEUE_PREFIX,
        "FAIR_PREFIX": keys.FAIR_PREFIX,
        "RUN_PREFIX": keys.RUN_PREFIX,
        "JOB_PREFIX": keys.ARQ_JOB_PREFIX,
        "TAG_OPEN": keys.TAG_OPEN,
        "TAG_CLOSE": keys.TAG_CLOSE,
        "SEPARATOR": keys.JOB_SEPARATOR,
        "RING": keys.FAIR_RING_SUFFIX,
        "KEYS": keys.FAIR_KEYS_INFIX,
        "LANE": keys.FAIR_LANE_INFIX,
        "TENANT_FIELD": TENANT_FIELD,
        "KEY_FIELD": KEY_FIELD,
        "WEIGHT_FIELD": WEIGHT_FIELD,
        "TENANT_WEIGHT_FIELD": TENANT_WEIGHT_FIELD,
        "RANK_FIELD": RANK_FIELD,
        "DEFAULT_TENANT": DEFAULT_TENANT,
        "DEFAULT_KEY": DEFAULT_KEY,
        "TURN_SEPARATOR": TURN_SEPARATOR,
        "LANE_SEPARATOR": LANE_SEPARATOR,
        "LISTED": LISTED_MEMBER,
        "LISTED_SCORE": LISTED_SCORE,
        "ONLY": ONLY_PREFIX,
        "ONLY_SCORE": ONLY_SCORE,
    }
    body = ", ".join(f"{k} = {json.dumps(v)}" for k, v in table.items())
    return f"local FAIR = {{{body}, OFFSET = {INDEXED_OFFSET_MS}}}\n"
