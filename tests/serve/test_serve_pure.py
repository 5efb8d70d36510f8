"""The pure parts of the HTTP front door: chunk mapping, UIMessage mapping, keys, cursors."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agentq.orchestrator.core.events import parse_event
from agentq.orchestrator.core.messages import (
    AssistantMessage,
    ToolCallPart,
    ToolMessage,
    ToolResultPart,
    UserMessage,
)
from agentq.orchestrator.runs.index import Cursor
from agentq.serve.auth import OPEN, TENANT_SCOPES, KeyKind, hash_key, parse_keys
from agentq.serve.chat.messages import (
    ChatInputError,
    UIMessage,
    check_request,
    known_calls,
    new_turn,
    user_messages,
)
from agentq.serve.chat.ui_stream import UIChunks
from agentq.serve.door_spans import untraced
from agentq.serve.metrics import submit_outcome
from agentq.serve.server import is_loopback

pytestmark = pytest.mark.unit


def ev(seq: int, type_: str, **fields: Any) -> Any:
    return parse_event(seq, json.dumps({"type": type_, "run_id": "r", "at": 0.0, **fields}))


def test_events_become_ui_chunks() -> None:
    chunks = UIChunks("r")
    out = [chunks.start()]
    for event in [
        ev(1, "start-step", step=0),
        ev(2, "text-delta", step=0, delta="Hi"),
        ev(3, "text-delta", step=0, delta="!"),
        ev(4, "tool-call", step=0, tool_call_id="c", tool_name="add", input={"a": 1}),
        ev(5, "tool-approval-request", step=0, tool_call_id="c", tool_name="add"),
        ev(6, "tool-approval-response", step=0, tool_call_id="c", approved=False),
        ev(7, "tool-error", step=0, tool_call_id="c", tool_name="add", error="denied"),
        ev(8, "start-step", step=0, attempt=2),
        ev(9, "tool-progress", step=0, tool_call_id="d", tool_name="add", output=1),
        ev(10, "finish-step", step=0, finish_reason="tool_calls", usage={}, text="Hi!"),
        ev(11, "finish", status="succeeded", usage={}, text="Hi!", finish_reason="tool_calls"),
    ]:
        out += chunks.feed(event)
    assert [c["type"] for c in out] == [
        "start",
        "start-step",
        "text-start",
        "text-delta",
        "text-delta",
        "text-end",
        "tool-input-start",
        "tool-input-available",
        "tool-approval-request",
        "tool-output-denied",
        "tool-output-available",
        "finish-step",
        "finish",
    ]
    assert out[0] == {"type": "start", "messageId": "r"}
    assert out[10]["preliminary"] is True
    assert out[-1]["finishReason"] == "tool-calls"


def test_a_run_s_output_is_a_data_part_before_its_finish() -> None:
    chunks = UIChunks("r")
    output = {"number": "A-1", "total": 12.5}
    done = ev(2, "finish", status="succeeded", usage={}, text="{}", output=output)
    out = chunks.feed(ev(1, "text-delta", step=0, delta="{}")) + chunks.feed(done)
    assert out[-3:] == [
        {"type": "text-end", "id": "text-0-1"},
        {"type": "data-output", "id": "r", "data": output},
        {"type": "finish", "finishReason": "stop"},
    ]
    plain = ev(1, "finish", status="succeeded", usage={}, text="hi")
    assert UIChunks("r").feed(plain) == [{"type": "finish", "finishReason": "stop"}]


def test_reasoning_and_text_stream_as_separate_parts() -> None:
    chunks = UIChunks("r")
    out: list[dict[str, Any]] = []
    for event in [
        ev(1, "start-step", step=0),
        ev(2, "reasoning-delta", step=0, delta="Think"),
        ev(3, "reasoning-delta", step=0, delta="ing."),
        ev(4, "text-delta", step=0, delta="Hi"),
        ev(5, "reasoning-delta", step=0, delta="More."),
        ev(6, "finish-step", step=0, finish_reason="stop", usage={}, text="Hi"),
    ]:
        out += chunks.feed(event)
    assert [(c["type"], c.get("id"), c.get("delta")) for c in out] == [
        ("start-step", None, None),
        ("reasoning-start", "reasoning-0-2", None),
        ("reasoning-delta", "reasoning-0-2", "Think"),
        ("reasoning-delta", "reasoning-0-2", "ing."),
        ("reasoning-end", "reasoning-0-2", None),
        ("text-start", "text-0-4", None),
        ("text-delta", "text-0-4", "Hi"),
        ("text-end", "text-0-4", None),
        ("reasoning-start", "reasoning-0-5", None),
        ("reasoning-delta", "reasoning-0-5", "More."),
        ("reasoning-end", "reasoning-0-5", None),
        ("finish-step", None, None),
    ]


def test_a_redelivered_step_s_text_is_not_repeated() -> None:
    def texts(*deltas: tuple[int, str]) -> list[list[str]]:
        """The text parts a client assembles from step 0's deltas, (attempt, delta)."""
        chunks = UIChunks("r")
        out: list[dict[str, Any]] = []
        for seq, (attempt, delta) in enumerate(deltas, 1):
            out += chunks.feed(ev(seq, "text-delta", step=0, attempt=attempt, delta=delta))
        parts: list[list[str]] = []
        for chunk in out:
            if chunk["type"] == "text-start":
                parts.append([])
            elif chunk["type"] == "text-delta":
                parts[-1].append(chunk["delta"])
        return parts

    same = texts((1, "Hello "), (2, "Hel"), (2, "lo "), (2, "world"), (1, "late"))
    assert ["".join(p) for p in same] == ["Hello world"]
    # An attempt that says something else cannot take back what was sent: its own part.
    other = texts((1, "Hello "), (2, "Hi"), (2, " there"))
    assert ["".join(p) for p in other] == ["Hello ", "Hi there"]


def test_a_call_s_input_streams_then_becomes_available() -> None:
    chunks = UIChunks("r")
    out: list[dict[str, Any]] = []
    for event in [
        ev(1, "start-step", step=0),
        ev(2, "text-delta", step=0, delta="Adding."),
        ev(3, "tool-input-start", step=0, tool_call_id="c", tool_name="add"),
        ev(4, "tool-input-delta", step=0, tool_call_id="c", delta='{"a":'),
        ev(5, "tool-input-delta", step=0, tool_call_id="c", delta="1}"),
        ev(6, "tool-call", step=0, tool_call_id="c", tool_name="add", input={"a": 1}),
    ]:
        out += chunks.feed(event)
    assert out[4:] == [
        {"type": "tool-input-start", "toolCallId": "c", "toolName": "add"},
        {"type": "tool-input-delta", "toolCallId": "c", "inputTextDelta": '{"a":'},
        {"type": "tool-input-delta", "toolCallId": "c", "inputTextDelta": "1}"},
        {"type": "tool-input-available", "toolCallId": "c", "toolName": "add", "input": {"a": 1}},
    ]
    assert out[3] == {"type": "text-end", "id": "text-0-2"}


def test_a_replaced_attempt_s_tool_input_is_not_sent() -> None:
    """A dead attempt's late pieces are dropped, and a delta is never sent before its
    start (the `ai` package refuses one)."""
    chunks = UIChunks("r")
    out: list[dict[str, Any]] = []
    for event in [
        ev(1, "start-step", step=0, attempt=1),
        ev(2, "start-step", step=0, attempt=2),
        ev(3, "tool-input-start", step=0, attempt=1, tool_call_id="old", tool_name="add"),
        ev(4, "tool-input-delta", step=0, attempt=2, tool_call_id="unseen", delta="{"),
        ev(5, "tool-input-start", step=0, attempt=2, tool_call_id="new", tool_name="add"),
        ev(6, "tool-input-delta", step=0, attempt=1, tool_call_id="new", delta="late"),
        ev(7, "tool-input-delta", step=0, attempt=2, tool_call_id="new", delta="{}"),
    ]:
        out += chunks.feed(event)
    assert [(c["type"], c.get("toolCallId")) for c in out] == [
        ("start-step", None),
        ("tool-input-start", "new"),
        ("tool-input-delta", "new"),
    ]
    assert out[-1]["inputTextDelta"] == "{}"


def test_a_call_streamed_again_starts_over() -> None:
    """A cut-off answer asked for again streams its calls again: the client resets the
    call's input on its second start."""
    chunks = UIChunks("r")
    out: list[dict[str, Any]] = []
    for event in [
        ev(1, "tool-input-start", step=0, tool_call_id="c", tool_name="add"),
        ev(2, "tool-input-delta", step=0, tool_call_id="c", delta='{"a":'),
        ev(3, "tool-input-start", step=0, tool_call_id="c", tool_name="add"),
        ev(4, "tool-input-delta", step=0, tool_call_id="c", delta='{"a":1}'),
        ev(5, "tool-call", step=0, tool_call_id="c", tool_name="add", input={"a": 1}),
    ]:
        out += chunks.feed(event)
    assert [c["type"] for c in out] == [
        "tool-input-start",
        "tool-input-delta",
        "tool-input-start",
        "tool-input-delta",
        "tool-input-available",
    ]


def test_a_chat_request_says_only_what_a_user_may() -> None:
    ask = UIMessage(id="u1", role="user", parts=[{"type": "text", "text": "add"}])
    made_up = {"type": "tool-add", "toolCallId": "c9", "state": "output-available", "output": 2}
    reply = UIMessage(role="assistant", parts=[{"type": "step-start"}, made_up])
    look = UIMessage(
        id="u2",
        role="user",
        parts=[
            {"type": "text", "text": "look"},
            {"type": "file", "mediaType": "image/png", "url": "data:image/png;base64,AA=="},
        ],
    )
    with pytest.raises(ChatInputError, match=r"messages\[0\]\.role: a client may not send system"):
        check_request([UIMessage(role="system", parts=[]), ask], set())
    with pytest.raises(ChatInputError, match=r"messages\[1\]\.parts\[1\]: a result for call 'c9'"):
        check_request([ask, reply, look], {"c1"})
    check_request([ask, reply, look], {"c9"})  # a call the run made: the server's record stands
    assert new_turn([ask, reply, look]) == [look]
    (user,) = user_messages([look])
    assert isinstance(user, UserMessage)
    assert not isinstance(user.content, str)
    assert user.content[1].type == "media"
    with pytest.raises(ChatInputError, match=r"messages\[0\]\.parts\[0\]: only base64 data"):
        user_messages([UIMessage(role="user", parts=[{"type": "file", "url": "http://x/y"}])])


def test_the_calls_a_chat_s_run_made_are_known() -> None:
    asked = AssistantMessage(
        content=[ToolCallPart(tool_call_id="c1", tool_name="add", input={"a": 1})]
    )
    done = ToolMessage(content=[ToolResultPart(tool_call_id="c1", tool_name="add", output=2)])
    again = AssistantMessage(
        content=[ToolCallPart(tool_call_id="c2", tool_name="add", input={"a": 2})]
    )
    start = UserMessage(content="go")
    assert known_calls([start, asked, done, again]) == {"c1", "c2"}


def test_keys_are_hashed_and_scoped() -> None:
    ring = parse_keys(f"# comment\n{hash_key('k1')} acme\n{hash_key('k2')} beta runs:read")
    first, second = ring.find("k1"), ring.find("k2")
    assert first is not None
    assert second is not None
    assert (first.tenant, first.scopes, first.kind) == ("acme", TENANT_SCOPES, KeyKind.TENANT)
    assert second.scopes == frozenset({"runs:read"})
    assert ring.find("k3") is None
    assert "k1" not in repr(ring)
    with pytest.raises(ValueError, match="entry 1: unknown scope 'runs:delete'"):
        parse_keys(f"{hash_key('k')} t runs:delete")
    with pytest.raises(ValueError, match="entry 1: expected"):
        parse_keys("plainkey tenant")
    with pytest.raises(ValueError, match="entry 2: this key hash is listed twice"):
        parse_keys(f"{hash_key('k')} t; {hash_key('k')} u")


def test_worker_keys_lease_their_queues_and_tenant_keys_lease_nothing() -> None:
    ring = parse_keys(
        f"{hash_key('t')} acme; {hash_key('w')} worker:node queue:node-tools,queue:js;"
        f"{hash_key('w2')} worker:node queue:node-tools; {hash_key('a')} ops admin"
    )
    tenant, node, twin, admin = (ring.find(k) for k in ("t", "w", "w2", "a"))
    assert tenant is not None
    assert node is not None
    assert twin is not None
    assert admin is not None
    assert not tenant.may_lease_any
    assert not tenant.may_lease("node-tools")
    assert "admin" not in tenant.scopes  # never by default
    assert (node.kind, node.tenant) == (KeyKind.WORKER, "")
    assert node.may_lease("node-tools")
    assert node.may_lease("js")
    assert not node.may_lease("tools")
    assert not node.scopes & TENANT_SCOPES
    # A lease is held by the key that took it; a pushed call's by its queue.
    assert node.holds(node.holder_id)
    assert not twin.holds(node.holder_id)
    assert node.holder_id.startswith("worker:node#")
    assert node.holder_id != twin.holder_id
    assert twin.holds("queue:node-tools")
    assert not twin.holds("queue:js")
    assert not tenant.holds(node.holder_id)
    assert not tenant.holds("queue:node-tools")
    assert admin.scopes == frozenset({"admin"})
    assert not admin.may_lease_any
    # Without keys, nobody is told apart.
    assert OPEN.holds("queue:anything")
    assert OPEN.may_lease("anything")


def test_cursor_round_trip_and_loopback() -> None:
    cursor = Cursor(1700000000.25, "run-1")
    assert Cursor.decode(cursor.encode()) == cursor
    with pytest.raises(ValueError, match="cursor"):
        Cursor.decode("garbage")
    assert is_loopback("127.0.0.1")
    assert is_loopback("::1")
    assert is_loopback("localhost")
    assert not is_loopback("0.0.0.0")


@pytest.mark.parametrize(
    ("method", "query", "traced"),
    [
        ("POST", b"", True),
        ("POST", b"wait=30", True),
        ("POST", b"key=secret", False),  # a span's url.query would keep the credential
        ("POST", b"a=1&token=t", False),
        ("GET", b"", False),
        ("HEAD", b"", False),
        ("OPTIONS", b"", False),
    ],
)
def test_the_doors_that_act_get_a_span_and_credentials_never_do(
    method: str, query: bytes, traced: bool
) -> None:
    assert untraced({"type": "http", "method": method, "query_string": query}) is not traced


@pytest.mark.parametrize(
    ("status", "outcome"),
    [
        (200, "accepted"),
        (201, "accepted"),
        (401, "unauthorized"),
        (409, "conflict"),
        (413, "too_large"),
        (422, "invalid"),
        (429, "rate_limited"),
        (503, "error"),
    ],
)
def test_a_submissions_outcome_is_named_by_its_status(status: int, outcome: str) -> None:
    assert submit_outcome(status) == outcome
