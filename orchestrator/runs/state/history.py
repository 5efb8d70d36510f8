"""How a run's message list holds its history: each tool output stored once.

A call's result is written once, into its step's hash (`StepField.RESULT`). The tool
message the join appends to the message list is therefore not a second copy of those
results but a reference to the step (`TOOL_RESULTS_REF` + step index); whoever reads
the history resolves it into the message as the join used to write it: the step's
results, in its call order, in the tool-message frame. Messages themselves are JSON
objects (they start with `{`), so a reference can never be mistaken for one, and a
list written before references existed (inline tool messages) reads the same.

A reference to a step of a few calls also carries the step's call order (its `ORDER`
field's JSON, right after the index): resolving it then reads the results alone, one
command instead of two in begin_step, which does it every step. A longer order (a wide
fan-out) is not copied into the list; its reference is the index alone, as every
reference written before orders were carried, and is resolved through the step's hash.

The Lua side (prelude.lua's `history_entry`) resolves references with the same frame;
`tests/orchestrator/runs/test_core_component_history.py` checks the two agree byte for byte.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from agentq.orchestrator.core.messages import ToolMessage
from agentq.orchestrator.runs.state.status import StepField, call_field

# Printable ASCII (it is also a generated Lua constant) that no JSON object starts with.
TOOL_RESULTS_REF = "@tool-results:"
# begin_step hands a worker that holds none of the history all of it when it is this
# short (a run's first steps); a longer one the worker reads outside the transition
# (RunStore.begin_step does): encoding it in Lua, as JSON, would hold Redis for all of it.
HISTORY_INLINE_MAX = 16
# A step's call order (its JSON) up to this many bytes rides in its reference.
REF_ORDER_MAX_BYTES = 256


def tool_results_ref(step: int, order: str | None = None) -> str:
    """The message-list entry standing for step `step`'s tool message; `order`, the
    step's ORDER JSON, rides along when it is short (the join's, prelude.lua)."""
    if order is not None and len(order.encode()) <= REF_ORDER_MAX_BYTES:
        return f"{TOOL_RESULTS_REF}{step}{order}"
    return f"{TOOL_RESULTS_REF}{step}"


def referenced_step(entry: str) -> int | None:
    """The step a message-list entry refers to, or None for a stored message."""
    if not entry.startswith(TOOL_RESULTS_REF):
        return None
    # The order, when carried, starts at its `[`: the step is read from its hash here.
    index, _, _ = entry[len(TOOL_RESULTS_REF) :].partition("[")
    return int(index)


def tool_message_frame() -> tuple[str, str]:
    """The JSON around a tool message's parts, as the join writes it."""
    empty = ToolMessage(content=[]).model_dump_json()
    open_, sep, close = empty.partition("[]")
    assert sep, empty
    return open_ + "[", "]" + close


def tool_message(step: Mapping[str, str]) -> str:
    """A step's tool message, from its hash: its results in call order, byte for byte
    what the join wrote before it wrote references."""
    open_, close = tool_message_frame()
    order: list[str] = json.loads(step.get(StepField.ORDER, "[]"))
    parts = [step[call_field(StepField.RESULT, call_id)] for call_id in order]
    return open_ + ",".join(parts) + close


def resolve_messages(
    entries: Sequence[str], steps: Sequence[Mapping[str, str] | None]
) -> list[str]:
    """The run's messages (JSON), each reference replaced by its step's tool message.
    `steps[n]` is step n's hash (None or empty when the step has none)."""
    out: list[str] = []
    for entry in entries:
        n = referenced_step(entry)
        if n is None:
            out.append(entry)
            continue
        step = steps[n] if n < len(steps) else None
        if not step:
            raise LookupError(f"the history refers to step {n}, which has no record")
        out.append(tool_message(step))
    return out
