"""The history a worker read for a run's model step, kept for the run's next step.

A run's message list only grows: an entry, once appended, is never rewritten (context
management and prepare_step hooks change what a step sends, never what is stored). So a
worker that ran step n of a run keeps the messages it read, parsed, under the run's
stamp (its creation time, which tells a later run of the same id apart); for step n+1
it tells `begin_step` how many it holds and receives only the messages appended since
(the step's assistant message and tool message). No step then re-reads, re-encodes or
re-parses the whole history, and a step's cost stays flat in the run's length. The run's
spec and tools, written once at create, are kept with it: a warm step reads neither.

A worker without an entry (another worker ran the last step, a restart, an evicted
entry) reads the whole history, as every worker did before. The cache is bounded: least
recently used runs go first once their JSON exceeds `max_bytes`.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from dataclasses import dataclass, field, replace

from agentq.orchestrator.core.messages import MESSAGE_ADAPTER, Message
from agentq.orchestrator.loop.prepare import Hasher, digesting, hasher_digest
from agentq.orchestrator.runs.definitions import stored_spec, stored_tool
from agentq.orchestrator.runs.state import BeginStep, BeginStepReply
from agentq.orchestrator.spec.run import RunSpec
from agentq.orchestrator.tools import ToolDef


@dataclass(frozen=True)
class History:
    """A run's spec, tools and first messages, as a worker read them."""

    stamp: str  # the run's stamp they were read under
    spec: RunSpec
    tools: tuple[ToolDef, ...]
    messages: tuple[Message, ...]
    size: int  # bytes of their JSON (what the cache's bound counts)
    # Fed with the messages (step_prep.messages_digest's), carried on as they grow.
    hasher: Hasher = field(default_factory=hashlib.sha256)

    @property
    def digest(self) -> str:
        """step_prep.messages_digest(messages), without going over them all again."""
        return hasher_digest(self.hasher)


class HistoryCache:
    """Per worker process: run id -> History, least recently used evicted first."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._runs: OrderedDict[str, History] = OrderedDict()
        self._size = 0

    def __len__(self) -> int:
        return len(self._runs)

    @property
    def size(self) -> int:
        return self._size

    def get(self, run_id: str) -> History | None:
        held = self._runs.get(run_id)
        if held is not None:
            self._runs.move_to_end(run_id)
        return held

    def put(self, run_id: str, history: History) -> None:
        self.drop(run_id)
        if history.size > self.max_bytes:
            return  # larger than the whole cache: the next step reads it all again
        self._runs[run_id] = history
        self._size += history.size
        while self._size > self.max_bytes:
            _, evicted = self._runs.popitem(last=False)
            self._size -= evicted.size

    def drop(self, run_id: str) -> None:
        held = self._runs.pop(run_id, None)
        if held is not None:
            self._size -= held.size


def asking(held: History | None, begin: BeginStep) -> BeginStep:
    """`begin` asking only for what `held` lacks."""
    if held is None:
        return begin
    return begin.model_copy(update={"known": len(held.messages), "known_stamp": held.stamp})


def completed(held: History | None, reply: BeginStepReply) -> History:
    """The run's whole history: what was held, then what the reply brought. The reply
    starts after the held messages, or at 0 (with the spec and tools) when the store
    would not build on them."""
    new = tuple(MESSAGE_ADAPTER.validate_json(m) for m in reply.messages)
    size = sum(len(m) for m in reply.messages)
    if reply.start == 0:
        return History(
            stamp=reply.stamp,
            # Parsed once per text by this process (runs share their tools, often a spec).
            spec=stored_spec(reply.spec),
            tools=tuple(stored_tool(t) for t in reply.tools),
            messages=new,
            size=size + len(reply.spec) + sum(len(t) for t in reply.tools),
            hasher=digesting(hashlib.sha256(), new),
        )
    if held is None or reply.start != len(held.messages) or reply.stamp != held.stamp:
        raise RuntimeError(
            f"begin_step answered from message {reply.start}, not after the "
            f"{len(held.messages) if held else 0} this worker holds"
        )
    return replace(
        held,
        messages=held.messages + new,
        size=held.size + size,
        hasher=digesting(held.hasher.copy(), new),
    )
