"""Component fixtures: the embedded runtime with a recording scripted model."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest

from agentq.workers import models as providers
from agentq.workers.models.base import ProviderContext
from agentq.workers.tools.function_tools import FunctionTool
from tests.component.core_support import Embedded, ModelLog, RecordingScripted


@pytest.fixture
def model_log(monkeypatch: pytest.MonkeyPatch) -> ModelLog:
    """Every model step of the test's runs, as the (recording) scripted model saw it."""
    log = ModelLog()

    def factory(ref: Any, ctx: ProviderContext) -> RecordingScripted:
        return RecordingScripted(log)

    monkeypatch.setitem(providers._FACTORIES, "scripted", factory)
    return log


@pytest.fixture
def start(model_log: ModelLog) -> Callable[[Sequence[FunctionTool]], Embedded]:
    """`async with start([tools]) as client:` in-memory Redis and in-process workers."""

    def _start(tools: Sequence[FunctionTool] = ()) -> Embedded:
        return Embedded(tools, model_log)

    return _start
