"""Where a key's slots are kept: the run meta fields the claim reads, the counter's
place beside the run, and the constants `orchestrator/machine/lua/conc.lua` reads."""

from __future__ import annotations

import json
from typing import Literal

from pydantic import BaseModel, ConfigDict

from agentq.orchestrator.core import keys
from agentq.orchestrator.core.run_ids import DEFAULT_TENANT, PLACED_RUN_ID, placement

# The run meta fields (runs/state/status.py: MetaField), written by `create` and
# dropped by the run's end (its end jobs then count under no key).
COUNTER_FIELD = "conc_counter"  # the key's counter (a Redis key in the run's slot)
MAX_FIELD = "conc_max"
KEY_FIELD = "conc_key"  # the key as the spec gave it (or key_from found it)

# How many held jobs one freed slot puts back into their lanes: the first that runs takes
# the slot, the others are held again at no more than a look each.
PUT_BACK_PER_RELEASE = 8


# What a live run is doing with its key: holding a slot (a job of it is running), or
# waiting for one (it holds none and the key is at its max).
SlotState = Literal["running", "waiting"]


class KeyLimit(BaseModel):
    """What a run shows of its concurrency key: the key (its tenant's) and its max; and,
    while the run lives, the key's runs holding a slot, its held jobs, and the run's
    `state` (None between jobs with a slot free, or parked). An ended run no longer
    counts under its key: those three are None."""

    model_config = ConfigDict(extra="forbid")

    key: str
    max: int
    in_use: int | None = None
    held: int | None = None
    state: SlotState | None = None


class Slot(BaseModel):
    """A run's concurrency key, resolved at submit: the key, its max, and its counter."""

    model_config = ConfigDict(extra="forbid")

    key: str
    max: int
    counter: str


def placed_id(run_id: str, tenant: str | None, key: str) -> str:
    """`run_id` placed in the partition of `tenant`'s key (core/run_ids.py)."""
    return placement(tenant, key) + run_id


def is_placed(run_id: str, tenant: str | None, key: str) -> bool:
    return PLACED_RUN_ID.match(run_id) is not None and run_id.startswith(placement(tenant, key))


def slot_of(run_id: str, tenant: str | None, key: str, max_running: int) -> Slot:
    """The slot of a (placed) run: its counter is named by tenant and key, so one tenant's
    key is never another's, in the run's partition."""
    name = f"{tenant or DEFAULT_TENANT}/{key}"
    return Slot(key=key, max=max_running, counter=keys.concurrency(run_id, name))


def lua_chunk() -> str:
    """The constants `orchestrator/machine/lua/conc.lua` reads, as a Lua table."""
    table = {
        "COUNTER_FIELD": COUNTER_FIELD,
        "MAX_FIELD": MAX_FIELD,
        "WAIT": keys.CONCURRENCY_WAIT_SUFFIX,
        "QUEUE_PREFIX": keys.QUEUE_PREFIX,
        "HELD_PREFIX": keys.HELD_PREFIX,
        "PREFIX": keys.CONCURRENCY_PREFIX,
        "ACTIVE": keys.CONCURRENCY_ACTIVE,
        "TAG_OPEN": keys.TAG_OPEN,
        "TAG_CLOSE": keys.TAG_CLOSE,
        "SEPARATOR": keys.JOB_SEPARATOR,
        "WAKE_PREFIX": keys.WAKE_PREFIX,
    }
    body = ", ".join(f"{k} = {json.dumps(v)}" for k, v in table.items())
    return f"local CONC = {{{body}, PUT_BACK = {PUT_BACK_PER_RELEASE}}}\n"
