"""The code kind's typed config reaches the sandbox request as the spec said it
(no sandbox here: a recording stand-in for the manager)."""

from __future__ import annotations

from typing import Any

import pytest

from agentq.orchestrator.core.errors import SpecError, ToolError
from agentq.orchestrator.core.settings import Settings
from agentq.orchestrator.spec.resolution import resolve_tools
from agentq.orchestrator.spec.run import RunSpec
from agentq.orchestrator.tools import ToolAnnouncement, registry_key
from agentq.sandbox import ExecRequest, ExecResult
from agentq.sandbox.config import SandboxConfig
from agentq.workers.tools.code import CodeExecutor
from agentq.workers.tools.context import ToolContext

pytestmark = pytest.mark.unit

RUN_PYTHON = ToolAnnouncement(name="run_python", kind="code", queue="sandbox", server="python")


class RecordingManager:
    def __init__(self) -> None:
        self.calls: list[tuple[ExecRequest, str | None]] = []

    async def execute(self, request: ExecRequest, session: str | None) -> ExecResult:
        self.calls.append((request, session))
        return ExecResult(exit_code=0, stdout="42\n")


async def test_language_session_network_and_limits_reach_the_request() -> None:
    spec = RunSpec.model_validate(
        {
            "model": "openai:m",
            "prompt": "p",
            "tools": [
                {
                    "type": "code",
                    "language": "python",
                    "session": "run",
                    "network": True,
                    "limits": {"memory_mb": 128, "timeout_s": 3},
                }
            ],
        }
    )
    allowed = Settings(sandbox_allow_network=True)
    (tool,) = resolve_tools(spec, {registry_key(RUN_PYTHON): RUN_PYTHON}, 0.0, settings=allowed)
    executor = CodeExecutor(SandboxConfig(allow_network=True))
    manager = RecordingManager()
    executor.manager = manager  # type: ignore[assignment]
    ctx = ToolContext(run_id="r1", step=0, call_id="c", tool=tool, attempt=1, deadline_at=0.0)
    output: Any = await executor.execute(tool, {"code": "print(42)"}, ctx)
    assert output["stdout"] == "42\n"
    ((request, session),) = manager.calls
    assert (request.language, request.network, session) == ("python", True, "r1")
    assert (request.limits.memory_mb, request.limits.timeout_s) == (128, 3)
    assert tool.timeout_s == 3


def _network_spec() -> RunSpec:
    return RunSpec.model_validate(
        {
            "model": "openai:m",
            "prompt": "p",
            "tools": [{"type": "code", "language": "python", "network": True}],
        }
    )


def test_a_spec_cannot_ask_for_network_unless_the_deployment_allows_it() -> None:
    registry = {registry_key(RUN_PYTHON): RUN_PYTHON}
    with pytest.raises(SpecError, match=r"tools\[0\]\.network: this deployment does not allow"):
        resolve_tools(_network_spec(), registry, 0.0, settings=Settings())


async def test_the_worker_refuses_network_its_deployment_does_not_allow() -> None:
    # A spec let through by a more permissive submitter still gets no network here.
    allowed = Settings(sandbox_allow_network=True)
    registry = {registry_key(RUN_PYTHON): RUN_PYTHON}
    (tool,) = resolve_tools(_network_spec(), registry, 0.0, settings=allowed)
    executor = CodeExecutor()  # the default SandboxConfig: no network
    manager = RecordingManager()
    executor.manager = manager  # type: ignore[assignment]
    ctx = ToolContext(run_id="r1", step=0, call_id="c", tool=tool, attempt=1, deadline_at=0.0)
    with pytest.raises(ToolError, match="does not allow network"):
        await executor.execute(tool, {"code": "print(42)"}, ctx)
    assert manager.calls == []
