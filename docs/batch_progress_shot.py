"""Render the real `agentq batch wait` progress bar of a real batch to SVG (for
docs/batch-progress.png: then `chromium --headless --screenshot` of the SVG).

    PYTHONPATH=. python docs/batch_progress_shot.py OUT.svg
"""

from __future__ import annotations

import asyncio
import io
import sys
from typing import Any

from rich.console import Console

from agentq.cli.batch import ProgressView
from agentq.orchestrator.core.settings import Settings
from agentq.workers.worker.embedded import embedded
from tests.support.infra import RedisServer
from tests.support.sample_tools import noop
from tests.support.specs import calls, scripted

TEMPLATE = scripted(calls(("noop", {})), {"text": "done"}, tools=["noop"], prompt="ticket {{n}}")
BATCH = "triage-2026-11"


def rows(n: int) -> list[dict[str, Any]]:
    """Tickets; every 37th names a tool nobody serves, so some lines fail."""
    found: list[dict[str, Any]] = []
    for i in range(n):
        row: dict[str, Any] = {"custom_id": f"ticket-{i}", "vars": {"n": str(i)}}
        if i % 37 == 5:
            row["spec"] = {"tools": [{"type": "function", "name": "missing_tool"}]}
        found.append(row)
    return found


async def main(out: str) -> None:
    server = RedisServer()
    settings = Settings(idle_poll_s=0.1)
    try:
        async with embedded(tools=[noop], redis_url=server.url, settings=settings) as client:
            await client.batches.submit(
                rows(400), template=TEMPLATE, batch_id=BATCH, concurrency=32
            )
            view = ProgressView(Console(file=io.StringIO(), width=118, force_terminal=True))
            while True:
                info = await client.batches.status(BATCH)
                view.update(info)
                if info.counts.ended >= 0.62 * info.lines:
                    break
                await asyncio.sleep(0.05)
            shot = Console(record=True, width=118, force_terminal=True, highlight=False)
            shot.print(f"$ agentq batch wait {BATCH}", style="bold")
            shot.print(view.progress.get_renderable())
            shot.save_svg(out, title="agentq batch wait")
            while True:  # let it end before the workers stop
                if (await client.batches.status(BATCH)).ended:
                    break
                await asyncio.sleep(0.2)
    finally:
        server.stop()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
