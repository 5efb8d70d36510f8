"""`agentq run`'s live view: follow a run's events and never wait silently.

Whenever the run waits for someone (an approval, a client tool's result, an
MCP server's question), the view says so; on a terminal it asks right there.
An embedded run nobody can answer (stdin is not a terminal) is cancelled with
a message rather than left waiting forever. When no event has come for a
while, the view says what the run is waiting for (and whether any worker
serves the queue it waits on).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from agentq.cli.render import ProgressPrinter, how_to_answer, pending_line
from agentq.orchestrator.client import Client
from agentq.orchestrator.core import events as ev
from agentq.orchestrator.core.envelopes import MODEL_QUEUE
from agentq.orchestrator.core.events import Event
from agentq.orchestrator.runs.result import RunResult

QUIET_S = 5.0  # say what the run waits for after this long without an event
# After these the run may wait for someone: look at what it waits for.
_PARKING = (ev.ToolApprovalRequest, ev.ToolInputRequest, ev.FinishStep)


class RunTimedOut(Exception):
    """`agentq run --timeout` passed; the run was cancelled."""


async def read_line(question: str) -> str:
    """One line typed at the terminal (empty at end of input).

    Read on the event loop, not in a thread: Ctrl-C cancels the command's task, and a
    thread blocked in `input()` would hold the interpreter's exit until Enter.
    """
    loop = asyncio.get_running_loop()
    sys.stdout.write(question)
    sys.stdout.flush()
    line: asyncio.Future[str] = loop.create_future()

    def readable() -> None:
        if not line.done():
            line.set_result(sys.stdin.readline())

    fd = sys.stdin.fileno()
    loop.add_reader(fd, readable)
    try:
        return (await line).removesuffix("\n")
    finally:
        loop.remove_reader(fd)


@dataclass
class LiveRun:
    client: Client
    run_id: str
    printer: ProgressPrinter
    # Ask on the terminal for what the run waits for.
    interactive: bool
    # Nobody else can answer this run (embedded, in-memory): never wait on a person.
    private: bool
    ask: Callable[[str], Awaitable[str]] = read_line
    quiet_s: float = QUIET_S
    _handled: set[str] = field(default_factory=set)
    # Calls a worker has taken and not yet answered: the run waits on them, not on workers.
    _running: dict[str, str] = field(default_factory=dict)
    _told_idle: bool = False

    async def follow(self) -> None:
        if not self.private:
            await self._check_workers()
        queue: asyncio.Queue[Event | None] = asyncio.Queue()

        async def pump() -> None:
            try:
                async for event in self.client.runs.events(self.run_id, follow=True):
                    await queue.put(event)
            finally:
                await queue.put(None)

        reader = asyncio.create_task(pump())
        try:
            while True:
                try:
                    event = await asyncio.wait_for(queue.get(), self.quiet_s)
                except TimeoutError:
                    await self._quiet()
                    continue
                if event is None:
                    break
                self._told_idle = False
                self._track(event)
                self.printer.show(event)
                if isinstance(event, _PARKING):
                    await self._answer_pending()
        finally:
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await reader
        reader.result()  # re-raise a failure of the event stream

    def _track(self, event: Event) -> None:
        if isinstance(event, ev.ToolRunning):
            self._running[event.tool_call_id] = event.tool_name or "tool"
        elif isinstance(event, (ev.ToolResult, ev.ToolError)):
            self._running.pop(event.tool_call_id, None)

    async def _answer_pending(self) -> None:
        result = await self.client.runs.result(self.run_id)
        for item in result.pending:
            key = str(item.get("request_id") or item.get("tool_call_id"))
            if key in self._handled:
                continue
            self._handled.add(key)
            if self.interactive:
                await self._ask(item)
            elif self.private:
                await self.client.runs.cancel(
                    self.run_id, reason="nobody can answer an embedded run without a terminal"
                )
                self.printer.note(
                    f"the run waits: {pending_line(self.run_id, item)}; an embedded run cannot "
                    "be answered from elsewhere and stdin is not a terminal, so it is cancelled "
                    "(use --redis with a shared Redis to answer from another shell)"
                )
                return
            else:
                self.printer.note(f"waiting: {pending_line(self.run_id, item)}")
                self.printer.note(f"  answer with: {how_to_answer(self.run_id, item)}")

    async def _quiet(self) -> None:
        if self._told_idle:
            return
        self._told_idle = True
        result = await self.client.runs.result(self.run_id)
        if result.pending:
            for item in result.pending:
                self.printer.note(f"still waiting: {pending_line(self.run_id, item)}")
            return
        if self._running:
            calls = ", ".join(f"{name}#{call}" for call, name in self._running.items())
            self.printer.note(f"still running: {calls} (no event for {self.quiet_s:g} s)")
            return
        unserved = [] if self.private else await self._unserved_queues()
        hint = (
            f"; no live worker serves {', '.join(repr(q) for q in unserved)} (see `agentq workers`)"
            if unserved
            else ""
        )
        self.printer.note(
            f"waiting for workers: no event for {self.quiet_s:g} s (run {result.status})" + hint
        )

    async def _unserved_queues(self) -> list[str]:
        """The queues this run needs (model steps, its tools') that no live worker serves."""
        needed = {MODEL_QUEUE}
        for tool in await self.client.runs.tools(self.run_id):
            if tool.queue:
                needed.add(tool.queue)
        served = {q for w in await self.client.fleet.workers() for q in w.queues}
        return sorted(needed - served)

    async def _check_workers(self) -> None:
        unserved = await self._unserved_queues()
        if unserved:
            names = ", ".join(repr(q) for q in unserved)
            self.printer.note(
                f"no live worker serves the {names} queue yet: the run waits until one "
                "starts (`agentq worker --redis URL`; `agentq workers` lists them)"
            )

    async def _ask(self, item: dict[str, Any]) -> None:
        status = str(item.get("status", ""))
        if status == "awaiting-input":
            await self._ask_input(item)
        elif "approval" in status:
            await self._ask_approval(item)
        else:
            await self._ask_result(item)

    async def _ask_approval(self, item: dict[str, Any]) -> None:
        self.printer.note(pending_line(self.run_id, item))
        answer = await self.ask("  approve this call? [y/N] ")
        approved = answer.strip().lower() in ("y", "yes")
        reason = None if approved else (await self.ask("  reason (optional): ")) or None
        await self.client.runs.approve(
            self.run_id, str(item["tool_call_id"]), approved=approved, reason=reason
        )

    async def _ask_result(self, item: dict[str, Any]) -> None:
        self.printer.note(pending_line(self.run_id, item))
        text = await self.ask("  the tool's output (JSON or text; start with ! for an error): ")
        is_error = text.startswith("!")
        text = text.removeprefix("!").strip()
        try:
            output: Any = json.loads(text)
        except ValueError:
            output = text
        await self.client.runs.submit_tool_result(
            self.run_id, str(item["tool_call_id"]), output, is_error=is_error
        )

    async def _ask_input(self, item: dict[str, Any]) -> None:
        self.printer.note(pending_line(self.run_id, item))
        schema = item.get("schema") or {}
        if schema:
            self.printer.note(f"  expected: {json.dumps(schema, ensure_ascii=False)}")
        while True:
            text = (await self.ask("  answer as a JSON object (empty declines): ")).strip()
            if not text:
                content = None
                break
            try:
                content = json.loads(text)
            except ValueError as exc:
                self.printer.note(f"  not JSON: {exc}")
                continue
            if isinstance(content, dict):
                break
            self.printer.note("  the answer must be a JSON object")
        await self.client.runs.answer(self.run_id, str(item["request_id"]), content)


async def drive(
    client: Client,
    run_id: str,
    printer: ProgressPrinter,
    *,
    interactive: bool,
    private: bool,
    timeout_s: float | None,
) -> RunResult:
    """Follow the run to its end (or cancel it at the timeout) and return its result."""
    live = LiveRun(client, run_id, printer, interactive=interactive, private=private)
    try:
        await asyncio.wait_for(live.follow(), timeout_s)
    except TimeoutError:
        await client.runs.cancel(run_id, reason=f"timed out after {timeout_s:g} s")
        printer.note(f"timed out after {timeout_s:g} s: run {run_id} cancelled")
        raise RunTimedOut from None
    return await client.runs.wait(run_id)
