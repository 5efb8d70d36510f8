"""Tool-call formats on the embedded runtime, through the scripted provider: the tool
mode a spec asks for, malformed prompt-based calls, and what the model sees of them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from agentq.orchestrator.core.errors import SpecError
from tests.support.embedded_runs import Embedded
from tests.support.specs import scripted

pytestmark = pytest.mark.component

Start = Callable[..., Embedded]


def in_mode(spec: dict[str, Any], mode: str) -> dict[str, Any]:
    spec["model"]["options"] = {"tool_mode": mode}
    return spec


async def test_submit_refuses_an_unknown_mode(start: Start) -> None:
    async with start([]) as client:
        with pytest.raises(SpecError, match=r"^model\.options\.tool_mode: 'json' is not a tool"):
            await client.runs.submit(in_mode(scripted({"text": "hi"}), "json"))
