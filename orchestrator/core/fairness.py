"""Who is served next: a run's lane (its tenant's fairness key and weight) and priority.

The claim is the scheduler (workers/queue/lua/take.lua): every queue partition keeps
its ready jobs in one sorted set per lane and a ring of the lanes with ready work, and
takes round-robin across the ring, `weight` jobs a turn (a deficit round-robin with a
job as the unit), then within a lane by rank. A lane is a fairness key of one tenant:
the tenant itself unless the spec names a key, so one tenant's flood never queues
another tenant's run behind it.

A rank is when the job was due less its run's priority times the aging step: a
higher priority is worth that much waiting, so a `low` job is overtaken only by
`high` jobs due less than (high - low) aging steps after it; steady `high` load
cannot starve it beyond that.

A run stores its lane once, in its meta hash (`LANE_FIELDS`); the enqueue and the claim
read it by reference (the job's run id), so a job's payload does not grow.
"""

from __future__ import annotations

import json
import re
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

# A ready job's score in its queue once it is in its lane: its due time less this, so
# indexed jobs sort below every due time (they stay in arq's ready range, oldest first)
# and the claim's sweep for jobs not yet in a lane, (0, now], never reads them again.
# 2^50 ms is ~35,000 years: every due time stays exact in a double.
INDEXED_OFFSET_MS = 2**50

# The run meta fields that hold its lane (runs/state/status.py: MetaField).
LANE_FIELD = "fair_lane"
WEIGHT_FIELD = "fair_weight"
RANK_FIELD = "fair_rank"


class Fairness(BaseModel):
    """A spec's `fairness`: the key its tenant's runs share a turn under, and its weight
    (a key of weight 3 gets three jobs a turn for one of a key of weight 1)."""

    model_config = ConfigDict(extra="forbid")

    key: str | None = None
    weight: int = Field(default=1, ge=1, le=MAX_WEIGHT)

    @field_validator("key")
    @classmethod
    def _check_key(cls, value: str | None) -> str | None:
        if value is not None and not FAIRNESS_KEY.match(value):
            raise ValueError("a fairness key is 1-128 letters, digits, '_', '.', ':', '@' or '-'")
        return value


class Lane(BaseModel):
    """Where a run's jobs wait: its lane's name, the lane's weight, and the rank offset
    its priority is worth (ms)."""

    model_config = ConfigDict(extra="forbid")

    name: str
    weight: int = 1
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


def check_spec_fairness(fairness: Fairness | None, allowed: bool) -> None:
    """A spec's `fairness` where the deployment lets specs choose their lane; else refused,
    so each tenant keeps one lane of weight 1 beside the others."""
    if fairness is not None and not allowed:
        raise SpecError(
            "fairness: this deployment gives each tenant one lane; a spec may choose its "
            "key and weight only where AGENTQ_SPEC_FAIRNESS is on"
        )


def lane_of(
    tenant: str | None, fairness: Fairness | None, priority: Priority | None, aging_s: float
) -> Lane:
    """A run's lane: its tenant's, or the tenant's named key (never another tenant's)."""
    owner = tenant or DEFAULT_TENANT
    key = fairness.key if fairness is not None else None
    return Lane(
        name=owner if key is None else f"{owner}/{key}",
        weight=fairness.weight if fairness is not None else 1,
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
        "TAG_OPEN": keys.TAG_OPEN,
        "TAG_CLOSE": keys.TAG_CLOSE,
        "SEPARATOR": keys.JOB_SEPARATOR,
        "RING": keys.FAIR_RING_SUFFIX,
        "TURNS": keys.FAIR_TURNS_SUFFIX,
        "WEIGHTS": keys.FAIR_WEIGHTS_SUFFIX,
        "LANE": keys.FAIR_LANE_INFIX,
        "LANE_FIELD": LANE_FIELD,
        "WEIGHT_FIELD": WEIGHT_FIELD,
        "RANK_FIELD": RANK_FIELD,
        "DEFAULT_LANE": DEFAULT_TENANT,
    }
    body = ", ".join(f"{k} = {json.dumps(v)}" for k, v in table.items())
    return f"local FAIR = {{{body}, OFFSET = {INDEXED_OFFSET_MS}}}\n"
