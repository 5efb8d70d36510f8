"""Anthropic prompt caching: where a Messages request puts its `cache_control` breakpoints.

The API caches the prefix of a request (tools, then system, then messages) up to a block
marked `cache_control`; a later request whose prefix matches up to one of its own marks
reads it at a tenth of the input price. A request may carry at most 4 marks, and from each
mark the API looks back only about 20 blocks for an earlier cached prefix. An agent loop
resends its history with one assistant turn and one turn of tool results more per step,
so the rolling strategy marks, on every request:

1. the end of the system prompt (or of the tools, without one): tools and system prompt,
   the same on every step and every run of one agent, are cached once;
2. the end of the previous request's history (the turn before the last assistant turn):
   exactly where the previous step's mark 3 was, so this request reads all of it however
   many blocks the last step added (parallel calls can add more than 20);
3. the end of the history: written now, read by the next step.

Three marks, never more than the API's 4, moving with the history. A prefix shorter than
the model's minimum (1,024 tokens and up) is simply not cached: no mark is ever refused.
"""

from __future__ import annotations

from typing import Any

from agentq.orchestrator.policy.caching import CachePolicy

# Blocks the API does not let a mark sit on (thinking must come back exactly as given).
_UNMARKABLE = frozenset({"thinking", "redacted_thinking"})


def cache_control(policy: CachePolicy) -> dict[str, str]:
    # 5 minutes is the API's default; naming it anyway keeps every mark explicit.
    return {"type": "ephemeral", "ttl": policy.ttl}


def place_breakpoints(body: dict[str, Any], policy: CachePolicy) -> dict[str, Any]:
    """`body` (a Messages request as the wire renders it) with its cache marks placed; the
    body is changed in place and returned."""
    if not policy.enabled:
        return body
    mark = cache_control(policy)
    _mark_prefix(body, mark)
    messages: list[dict[str, Any]] = body.get("messages") or []
    for index in _history_ends(messages):
        _mark_last_block(messages[index], mark)
    return body


def _mark_prefix(body: dict[str, Any], mark: dict[str, str]) -> None:
    system = body.get("system")
    if isinstance(system, str) and system:
        body["system"] = [{"type": "text", "text": system, "cache_control": mark}]
    elif body.get("tools"):
        body["tools"][-1] = {**body["tools"][-1], "cache_control": mark}


def _history_ends(messages: list[dict[str, Any]]) -> list[int]:
    """The indexes of the previous request's last turn and of this one's: the user turn
    before the last assistant turn, and the last turn."""
    if not messages:
        return []
    last = len(messages) - 1
    assistants = [i for i, m in enumerate(messages) if m.get("role") == "assistant"]
    previous = assistants[-1] - 1 if assistants else -1
    return [previous, last] if 0 <= previous < last else [last]


def _mark_last_block(message: dict[str, Any], mark: dict[str, str]) -> None:
    content = message.get("content")
    if isinstance(content, str):
        if content:
            message["content"] = [{"type": "text", "text": content, "cache_control": mark}]
        return
    if not isinstance(content, list):
        return
    for index in range(len(content) - 1, -1, -1):
        block = content[index]
        if block.get("type") in _UNMARKABLE or block.get("text") == "":
            continue
        content[index] = {**block, "cache_control": mark}
        return
