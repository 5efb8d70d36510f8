"""`agentq run`'s live view on the embedded runtime: it asks for what the run waits
for on a terminal, and cancels an embedded run nobody can answer."""

from __future__ import annotations

import asyncio
import io
from collections.abc import Awaitable, Callable

import pytest
from rich.console import Console

from agentq import tool
from agentq.cli.live import LiveRun
from agentq.cli.render import ProgressPrinter
from agentq.orchestrator.core.settings import Settings
from agentq.workers.worker.embedded import embedded
from tests.support.sample_tools import add
from tests.support.specs import calls, parked_spec, scripted

pytestmark = pytest.mark.component

FAST = Settings(idle_poll_s=0.1, lease_s=5.0)


def answers(*replies: str) -> tuple[Callable[[str], Awaitable[str]], list[str]]:
    asked: list[str] = []
    it = iter(replies)

    async def ask(question: str) -> str:
        asked.append(question)
        return next(it)

    return ask, asked


def printer() -> tuple[ProgressPrinter, io.StringIO]:
    out = io.StringIO()
    return ProgressPrinter(Console(file=out, soft_wrap=True, emoji=False)), out


async def test_a_terminal_user_approves_and_answers_a_client_tool() -> None:
    ask, asked = answers("y", '{"name": "Ada"}')
    show, out = printer()
    async with embedded(tools=[add], settings=FAST) as client:
        run_id = await client.runs.submit(parked_spec())
        live = LiveRun(client, run_id, show, interactive=True, private=True, ask=ask)
        await live.follow()
        result = await client.runs.wait(run_id)
    assert result.status == "succeeded", out.getvalue()
    outputs = {r.tool_call_id: r.output for r in result.steps[0].tool_results}
    assert outputs == {"c1": 3.0, "c2": {"name": "Ada"}}
    assert any("[y/N]" in q for q in asked)
    assert "waits for approval" in out.getvalue()


async def test_an_embedded_run_nobody_can_answer_is_cancelled_with_a_reason() -> None:
    show, out = printer()
    async with embedded(tools=[add], settings=FAST) as client:
        run_id = await client.runs.submit(parked_spec())
        live = LiveRun(client, run_id, show, interactive=False, private=True)
        await live.follow()
        result = await client.runs.wait(run_id)
    assert result.status == "cancelled"
    assert "cannot be answered from elsewhere" in out.getvalue()


class Watched(io.StringIO):
    """Console output that sets `seen` once `wanted` has been written."""

    def __init__(self, wanted: str) -> None:
        super().__init__()
        self.wanted = wanted
        self.seen = asyncio.Event()

    def write(self, text: str) -> int:
        written = super().write(text)
        if self.wanted in self.getvalue():
            self.seen.set()
        return written


async def test_a_shared_run_says_how_to_answer_from_another_shell() -> None:
    out = Watched("agentq tool-result")
    show = ProgressPrinter(Console(file=out, soft_wrap=True, emoji=False))
    async with embedded(tools=[add], settings=FAST) as client:
        run_id = await client.runs.submit(parked_spec())
        live = LiveRun(client, run_id, show, interactive=False, private=False)
        follower = asyncio.create_task(live.follow())
        await asyncio.wait_for(out.seen.wait(), 30)
        await client.runs.approve(run_id, "c1")
        await client.runs.submit_tool_result(run_id, "c2", "Ada")
        await follower
        result = await client.runs.wait(run_id)
    assert result.status == "succeeded"
    text = out.getvalue()
    assert f"agentq approve {run_id} c1" in text
    assert f"agentq tool-result {run_id} c2" in text


async def test_a_quiet_run_whose_tool_is_running_is_not_waiting_for_workers() -> None:
    release = asyncio.Event()

    @tool
    async def slow() -> str:
        """Run until the test lets go."""
        await release.wait()
        return "done"

    out = Watched("no event for")
    show = ProgressPrinter(Console(file=out, soft_wrap=True, emoji=False))
    spec = scripted(calls(("slow", {})), {"text": "ok"}, tools=["slow"])
    async with embedded(tools=[slow], settings=FAST) as client:
        run_id = await client.runs.submit(spec)
        live = LiveRun(client, run_id, show, interactive=False, private=True, quiet_s=0.2)
        follower = asyncio.create_task(live.follow())
        await asyncio.wait_for(out.seen.wait(), 30)
        release.set()
        await follower
        result = await client.runs.wait(run_id)
    assert result.status == "succeeded"
    text = out.getvalue()
    assert "waiting for workers" not in text
    assert "still running: slow#" in text
