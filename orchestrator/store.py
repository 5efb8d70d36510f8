"""The run store: every change to a run is one atomic Lua transition.

The Python side builds the arguments (events, jobs, results) from the pure
core's decisions; the Lua side checks the run is in the state the transition
expects and applies it whole. A re-delivered job therefore finds its
transition already applied and does nothing.
"""

from __future__ import annotations

import inspect
import json
import time
from collections.abc import AsyncIterator, Awaitable, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any, TypeVar

from redis.asyncio import Redis
from redis.commands.core import AsyncScript

from agentq.orchestrator import keys
from agentq.orchestrator.errors import RunNotFoundError
from agentq.orchestrator.events import TERMINAL_EVENTS, Event, parse_event
from agentq.orchestrator.tool_resolution import ToolAnnouncement, registry_key

DEFAULT_RETENTION_S = 7 * 24 * 3600

_TRANSITIONS = (
    "create",
    "begin_step",
    "commit_step",
    "claim_call",
    "record_result",
    "resolve_approval",
    "post_result",
    "emit",
    "fail_run",
    "cancel",
    "input_request",
    "input_answer",
)


def _load_scripts() -> dict[str, str]:
    folder = resources.files("agentq.orchestrator") / "lua"
    prelude = (folder / "prelude.lua").read_text()
    return {name: prelude + "\n" + (folder / f"{name}.lua").read_text() for name in _TRANSITIONS}


_SCRIPTS = _load_scripts()


T = TypeVar("T")


async def _resolved(value: Awaitable[T] | T) -> T:
    """redis-py types its asyncio commands as `Awaitable[X] | X`; this narrows them."""
    if inspect.isawaitable(value):
        return await value
    return value


def _drop_nulls(value: Any) -> Any:
    """JSON null decodes to a truthy sentinel in Lua's cjson: leave such keys out instead."""
    if isinstance(value, dict):
        return {k: _drop_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_drop_nulls(v) for v in value]
    return value


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


@dataclass(frozen=True)
class StepContext:
    """What `begin_step` hands a model step."""

    spec_json: str
    tool_jsons: list[str]
    message_jsons: list[str]


class RunStore:
    def __init__(self, redis: Redis, *, retention_s: int = DEFAULT_RETENTION_S) -> None:
        self.redis = redis
        self.retention_s = retention_s
        self._scripts: dict[str, AsyncScript] = {
            name: redis.register_script(src) for name, src in _SCRIPTS.items()
        }

    async def _run(self, name: str, run_id: str, args: dict[str, Any]) -> Any:
        args.setdefault("run_id", run_id)
        args.setdefault("at", time.time())
        args.setdefault("retention_s", self.retention_s)
        payload = json.dumps(_drop_nulls(args), separators=(",", ":"), default=str)
        return await self._scripts[name](keys=keys.run_keys(run_id), args=[payload])

    # -- transitions ---------------------------------------------------------

    async def create(
        self,
        run_id: str,
        *,
        spec_json: str,
        tool_jsons: dict[str, str],
        message_jsons: Sequence[str],
        trace: str,
        event: str,
        first_job: dict[str, Any],
    ) -> bool:
        created = await self._run(
            "create",
            run_id,
            {
                "spec": spec_json,
                "tools": tool_jsons,
                "tool_order": list(tool_jsons),
                "messages": list(message_jsons),
                "trace": trace,
                "event": event,
                "next_job": first_job,
            },
        )
        return bool(created)

    async def begin_step(self, run_id: str, step: int, event: str) -> StepContext | str:
        reply = await self._run("begin_step", run_id, {"step": step, "event": event})
        status = _text(reply[0])
        if status != "ok":
            return status
        tool_jsons = json.loads(reply[2])
        return StepContext(
            spec_json=_text(reply[1]),
            tool_jsons=[t for t in (tool_jsons or []) if t],
            message_jsons=json.loads(reply[3]),
        )

    async def commit_step(self, run_id: str, args: dict[str, Any]) -> str:
        return _text(await self._run("commit_step", run_id, args))

    async def claim_call(
        self, run_id: str, step: int, call_id: str, event: str
    ) -> tuple[str, str | None, str | None]:
        reply = await self._run(
            "claim_call", run_id, {"step": step, "call_id": call_id, "event": event}
        )
        status = _text(reply[0])
        if status != "run":
            return status, None, None
        tool = _text(reply[2])
        return status, _text(reply[1]), tool or None

    async def record_result(self, run_id: str, args: dict[str, Any]) -> str:
        return _text(await self._run("record_result", run_id, args))

    async def resolve_approval(self, run_id: str, args: dict[str, Any]) -> list[str]:
        return [_text(v) for v in await self._run("resolve_approval", run_id, args)]

    async def post_result(self, run_id: str, args: dict[str, Any]) -> list[str]:
        return [_text(v) for v in await self._run("post_result", run_id, args)]

    async def input_request(self, run_id: str, args: dict[str, Any]) -> str:
        return _text(await self._run("input_request", run_id, args))

    async def input_answer(self, run_id: str, args: dict[str, Any]) -> str:
        return _text(await self._run("input_answer", run_id, args))

    async def wait_answer(self, run_id: str, request_id: str, timeout_s: float) -> str | None:
        """Block until the answer to an input request is posted (or the timeout passes)."""
        popped = await _resolved(
            self.redis.blpop([keys.answer(run_id, request_id)], timeout=max(1, int(timeout_s)))
        )
        return _text(popped[1]) if popped else None

    async def emit(self, run_id: str, events: Sequence[str]) -> int:
        if not events:
            return 0
        return int(await self._run("emit", run_id, {"events": list(events)}))

    async def fail_run(self, run_id: str, error: dict[str, Any]) -> str:
        return _text(await self._run("fail_run", run_id, {"error": json.dumps(error)}))

    async def cancel(self, run_id: str, reason: str | None) -> str:
        return _text(
            await self._run("cancel", run_id, {"job_prefix": f"aq:{run_id}:", "reason": reason})
        )

    # -- reads ---------------------------------------------------------------

    async def meta(self, run_id: str) -> dict[str, str]:
        raw = await _resolved(self.redis.hgetall(keys.meta(run_id)))
        if not raw:
            raise RunNotFoundError(f"no run with id {run_id!r}")
        return {_text(k): _text(v) for k, v in raw.items()}

    async def call_state(
        self, run_id: str, step: int, call_id: str
    ) -> tuple[str | None, str | None]:
        """The call's record and status, for building transitions from outside."""
        call, status = await _resolved(
            self.redis.hmget(keys.step(run_id, step), [f"c:{call_id}", f"st:{call_id}"])
        )
        return (_text(call) if call else None, _text(status) if status else None)

    async def tool_def(self, run_id: str, name: str) -> str | None:
        raw = await _resolved(self.redis.hget(keys.tools(run_id), name))
        return _text(raw) if raw else None

    async def tool_defs(self, run_id: str) -> list[str]:
        """The run's frozen tool definitions (JSON), for readers such as `agentq run`."""
        raw = await _resolved(self.redis.hgetall(keys.tools(run_id)))
        return [_text(v) for v in raw.values()]

    async def snapshot(self, run_id: str) -> tuple[dict[str, str], list[str], list[dict[str, str]]]:
        """Meta, messages and every step hash, for assembling a RunResult."""
        meta = await self.meta(run_id)
        last = int(meta.get("step", "0"))
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.lrange(keys.messages(run_id), 0, -1)
            for n in range(last + 1):
                pipe.hgetall(keys.step(run_id, n))
            replies = await pipe.execute()
        messages = [_text(m) for m in replies[0]]
        steps = [{_text(k): _text(v) for k, v in r.items()} for r in replies[1:] if r]
        return meta, messages, steps

    async def events(
        self, run_id: str, after: int = 0, *, follow: bool = False, block_ms: int = 5000
    ) -> AsyncIterator[Event]:
        """Events after `after`; with `follow`, keep waiting until a terminal event."""
        stream = keys.events(run_id)
        last = after
        if follow:
            status = await _resolved(self.redis.hget(keys.meta(run_id), "status"))
            if status is None:
                raise RunNotFoundError(f"no run with id {run_id!r}")
            # An ended run's stream is complete: read what is left, do not block.
            follow = _text(status) not in ("succeeded", "failed", "cancelled")
        while True:
            if follow:
                reply = await self.redis.xread({stream: f"0-{last}"}, count=500, block=block_ms)
                entries = reply[0][1] if reply else []
            else:
                entries = await self.redis.xrange(stream, min=f"(0-{last}", count=500)
            for entry_id, fields in entries:
                last = int(_text(entry_id).split("-")[1])
                event = parse_event(last, fields[b"e"] if b"e" in fields else fields["e"])
                yield event
                if event.type in TERMINAL_EVENTS:
                    return
            if not follow and len(entries) < 500:
                return
            if follow and not entries:
                status = await _resolved(self.redis.hget(keys.meta(run_id), "status"))
                if status is None:
                    raise RunNotFoundError(f"no run with id {run_id!r}")
                if _text(status) in ("succeeded", "failed", "cancelled"):
                    return  # ended before `after`: nothing more will come

    # -- the tool registry -----------------------------------------------------

    async def announce(self, announcements: Sequence[ToolAnnouncement]) -> None:
        if not announcements:
            return
        now = time.time()
        mapping: dict[str | bytes, str | bytes | int | float] = {
            registry_key(a): a.model_copy(update={"seen_at": now}).model_dump_json()
            for a in announcements
        }
        await _resolved(self.redis.hset(keys.REGISTRY, mapping=mapping))

    async def registry(self) -> dict[str, ToolAnnouncement]:
        raw = await _resolved(self.redis.hgetall(keys.REGISTRY))
        return {_text(k): ToolAnnouncement.model_validate_json(v) for k, v in raw.items()}
