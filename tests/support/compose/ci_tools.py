"""The tools pool's module in the compose test (mounted at /tools).

`hold` records each start in /state/started (one line per delivery) and finishes only
once the test has created /state/release: the test kills the tools container while a
call is held, so the call must be delivered again to the restarted worker."""

from __future__ import annotations

import asyncio
import os
import socket
from pathlib import Path

from agentq import tool

STATE = Path(os.environ.get("AGENTQ_CI_STATE", "/state"))


@tool
async def hold(text: str) -> str:
    """Upper-case text, once the test lets the call through."""
    with (STATE / "started").open("a") as started:
        started.write(f"{socket.gethostname()} {os.getpid()}\n")
    # The release comes from another process (the test, through a bind mount): a file
    # polled, as no in-process event can carry it.
    while not (STATE / "release").exists():  # noqa: ASYNC110
        await asyncio.sleep(0.1)
    return text.upper()
