"""Context management, the pure part: what to send when the history is over budget.

The stored history stays complete; only what one step sends is compacted. A
history is split into a protected head (the first user message: the task), a
protected tail (the last `keep_last` messages, never starting inside a tool
call's answer) and a middle that a strategy may shrink:

- `drop_tool_results`: the middle's tool outputs are replaced by a short note;
- `drop_oldest`: the middle's oldest turns (an assistant message with its tool
  results) are left out until the estimate fits;
- `summarize`: the middle is replaced by one summary message, written by the
  summary model (I/O, in the worker) and stored once, so later steps reuse it.

Sizes are estimates: the provider's last reported input tokens plus ~4
characters a token for the messages added since (no tokenizer per provider).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from agentq.orchestrator.core.messages import (
    Message,
    ToolMessage,
    ToolResultPart,
    UserMessage,
)

Strategy = Literal["drop_tool_results", "drop_oldest", "summarize"]

CHARS_PER_TOKEN = 4
DEFAULT_KEEP_LAST = 4
DROPPED_RESULT = "[tool result left out to fit the context window]"
SUMMARY_PREFIX = "Summary of the earlier conversation:\n"
SUMMARY_INSTRUCTION = (
    "Summarize the conversation above for your own later use: the task, what was "
    "found, what was decided and what is left to do. Be brief and keep exact values."
)


class Compaction(BaseModel):
    """One compaction, as its `context-compacted` event and the step record carry it."""

    model_config = ConfigDict(extra="forbid")

    strategy: Strategy
    before_tokens: int
    after_tokens: int
    before_messages: int
    after_messages: int
    # With `summarize`: the summary replaces history[head:summary_upto].
    summary_upto: int | None = None
    summary: str | None = None  # the summary sent, so that a replay can send it too


class StoredSummary(BaseModel):
    model_config = ConfigDict(extra="forbid")

    upto: int  # the summary stands for history[head:upto]
    text: str
    count: int = 1  # how many summaries the run has made (the scripted model's index)


def estimate_tokens(messages: Sequence[Message]) -> int:
    return sum(math.ceil(len(m.model_dump_json()) / CHARS_PER_TOKEN) for m in messages)


def input_tokens(
    messages: Sequence[Message], last_input_tokens: int | None, sent_at_last: int | None
) -> int:
    """The history's size: the provider's count for what it last read, plus an estimate
    for what came after; an estimate of everything when there is no usable count."""
    if last_input_tokens and sent_at_last is not None and sent_at_last <= len(messages):
        return last_input_tokens + estimate_tokens(messages[sent_at_last:])
    return estimate_tokens(messages)


def over_budget(
    tokens: int, n_messages: int, max_input_tokens: int | None, keep_last: int | None
) -> bool:
    if max_input_tokens is not None:
        return tokens > max_input_tokens
    return keep_last is not None and n_messages > keep_last


def bounds(messages: Sequence[Message], keep_last: int | None) -> tuple[int, int]:
    """(head, tail): history[:head] and history[tail:] are never compacted."""
    head = 1 if messages and isinstance(messages[0], UserMessage) else 0
    keep = DEFAULT_KEEP_LAST if keep_last is None else keep_last
    tail = max(head, len(messages) - keep)
    # A tool message answers the assistant message before it: keep the two together.
    while tail > head and tail < len(messages) and isinstance(messages[tail], ToolMessage):
        tail -= 1
    return head, tail


def drop_tool_results(messages: Sequence[Message], head: int, tail: int) -> list[Message]:
    out = list(messages)
    for i in range(head, tail):
        message = out[i]
        if isinstance(message, ToolMessage):
            out[i] = ToolMessage(
                content=[
                    part.model_copy(update={"output": DROPPED_RESULT, "model_output": None})
                    if isinstance(part, ToolResultPart)
                    else part
                    for part in message.content
                ]
            )
    return out


def _turns(messages: Sequence[Message], head: int, tail: int) -> list[tuple[int, int]]:
    """The middle's turns, oldest first: a message with the tool messages after it."""
    turns: list[tuple[int, int]] = []
    start = head
    for i in range(head + 1, tail + 1):
        if i == tail or not isinstance(messages[i], ToolMessage):
            turns.append((start, i))
            start = i
    return [t for t in turns if t[0] < t[1]]


def drop_oldest(
    messages: Sequence[Message], head: int, tail: int, max_input_tokens: int | None, tokens: int
) -> list[Message]:
    """Leave out the oldest turns until the estimate fits (all of the middle when there
    is no token budget: the rule is then `keep_last_messages` alone)."""
    dropped_upto = head
    for start, end in _turns(messages, head, tail):
        if max_input_tokens is not None and tokens <= max_input_tokens:
            break
        tokens -= estimate_tokens(messages[start:end])
        dropped_upto = end
    return [*messages[:head], *messages[dropped_upto:]]


def with_summary(messages: Sequence[Message], head: int, upto: int, summary: str) -> list[Message]:
    return [*messages[:head], UserMessage(content=SUMMARY_PREFIX + summary), *messages[upto:]]


def summary_input(
    messages: Sequence[Message], head: int, upto: int, previous: StoredSummary | None
) -> list[Message]:
    """What the summary model reads: the previous summary (if any), the messages it
    does not cover up to `upto`, and the instruction."""
    start = head
    lead: list[Message] = list(messages[:head])
    if previous is not None and head < previous.upto <= upto:
        lead.append(UserMessage(content=SUMMARY_PREFIX + previous.text))
        start = previous.upto
    return [*lead, *messages[start:upto], UserMessage(content=SUMMARY_INSTRUCTION)]


def reusable(
    messages: Sequence[Message],
    head: int,
    tail: int,
    stored: StoredSummary | None,
    max_input_tokens: int | None,
) -> bool:
    """Whether the stored summary still does: it covers the middle, or what it leaves
    uncovered fits the budget."""
    if stored is None or not head < stored.upto <= len(messages):
        return False
    if stored.upto >= tail:
        return True
    if max_input_tokens is None:
        return False
    candidate = with_summary(messages, head, stored.upto, stored.text)
    return estimate_tokens(candidate) <= max_input_tokens


def compact(
    messages: Sequence[Message],
    strategy: Literal["drop_tool_results", "drop_oldest"],
    *,
    max_input_tokens: int | None,
    keep_last: int | None,
    tokens: int,
) -> tuple[list[Message], Compaction]:
    """The non-summarizing strategies, whole: what to send and the record of it."""
    head, tail = bounds(messages, keep_last)
    if strategy == "drop_tool_results":
        out = drop_tool_results(messages, head, tail)
    else:
        out = drop_oldest(messages, head, tail, max_input_tokens, tokens)
    return out, record(strategy, messages, out, tokens)


def record(
    strategy: Strategy,
    before: Sequence[Message],
    after: Sequence[Message],
    tokens: int,
    summary_upto: int | None = None,
) -> Compaction:
    # The same scale before and after: the history's figure less the estimated saving.
    saved = estimate_tokens(before) - estimate_tokens(after)
    return Compaction(
        strategy=strategy,
        before_tokens=tokens,
        after_tokens=max(0, tokens - saved),
        before_messages=len(before),
        after_messages=len(after),
        summary_upto=summary_upto,
    )


def last_count(previous: Mapping[str, Any] | None) -> tuple[int | None, int | None]:
    """From the previous step's record: its reported input tokens and how many messages
    it sent, when it sent the history whole (a compacted step's count says nothing of
    the history's size)."""
    prepared = (previous or {}).get("prepared") or {}
    if previous is None or "compaction" in prepared or "sent" not in prepared:
        return None, None
    tokens = int((previous.get("usage") or {}).get("input_tokens") or 0)
    return tokens or None, int(prepared["sent"]["n_messages"])


def tokens_to_compact(
    messages: Sequence[Message],
    *,
    max_input_tokens: int | None,
    keep_last: int | None,
    previous: Mapping[str, Any] | None,
) -> int | None:
    """The history's size when a compaction applies (over budget, and something between
    the task and the protected tail to compact); None when it is sent as it is."""
    tokens = input_tokens(messages, *last_count(previous))
    if not over_budget(tokens, len(messages), max_input_tokens, keep_last):
        return None
    head, tail = bounds(messages, keep_last)
    return tokens if head < tail else None
