"""Ownership and what the model sees of a result (pure parts of issue 18)."""

from __future__ import annotations

import base64

import pytest

from agentq.orchestrator.core.media import result_text
from agentq.sandbox.liveness import LocalLiveness
from agentq.sandbox.models import Artifact, ExecResult
from agentq.workers.tools.code import result_output

pytestmark = pytest.mark.unit


async def test_local_liveness_only_calls_an_owner_gone_once_its_record_lapsed() -> None:
    liveness = LocalLiveness()
    await liveness.beat("alive", ttl_s=60)
    await liveness.beat("lapsed", ttl_s=0)
    await liveness.beat("stopped", ttl_s=60)
    await liveness.forget("stopped")
    gone = await liveness.gone(["alive", "lapsed", "stopped", "never-heard-of"])
    assert gone == {"lapsed", "stopped"}


def test_a_long_text_artifact_reaches_the_model_as_a_head_and_a_reference() -> None:
    text = "line\n" * 100_000  # 500 kB, under the artifact limit, 8x the output cap
    result = ExecResult(
        exit_code=0,
        artifacts=[
            Artifact(path="big.txt", size=len(text), media_type="text/plain", text=text),
            Artifact(path="small.txt", size=2, media_type="text/plain", text="hi"),
        ],
    )
    output = result_output(result, text_chars=1000)
    big, small = output["artifacts"]
    assert small["text"] == "hi"
    assert big["type"] == "media"
    assert big["truncated"] is True
    assert big["text_head"] == text[:1000]
    assert base64.b64decode(big["data"]).decode() == text  # stored whole
    shown = result_text(output, "call_0_0")
    assert len(shown) < 5_000, "the model sees the head, not 500 kB"
    assert "call_0_0#0" in shown
