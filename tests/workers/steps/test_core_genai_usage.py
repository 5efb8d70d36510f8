"""A model step's `chat` span reports its usage in the GenAI conventions' names, cache
reads and writes apart from the whole prompt."""

from __future__ import annotations

import pytest

from agentq.orchestrator.core.messages import Usage
from agentq.orchestrator.core.model_io import ModelResponse
from agentq.workers.steps.genai_spans import chat_result_attributes

pytestmark = pytest.mark.unit


def test_the_step_span_carries_cache_reads_and_writes_apart() -> None:
    usage = Usage(
        input_tokens=125,
        output_tokens=9,
        cached_input_tokens=100,
        cache_write_tokens=5,
        reasoning_tokens=4,
    )
    attributes = chat_result_attributes(ModelResponse(usage=usage))
    assert attributes["gen_ai.usage.input_tokens"] == 125
    assert attributes["gen_ai.usage.cache_read.input_tokens"] == 100
    assert attributes["gen_ai.usage.cache_creation.input_tokens"] == 5
    assert attributes["gen_ai.usage.reasoning.output_tokens"] == 4


def test_a_step_without_caching_carries_no_cache_attributes() -> None:
    attributes = chat_result_attributes(ModelResponse(usage=Usage(input_tokens=3)))
    assert not [name for name in attributes if ".cache_" in name]
