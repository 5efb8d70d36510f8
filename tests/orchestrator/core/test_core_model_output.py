"""What a to_model_output hook may answer, and the one shape it becomes
(orchestrator/core/model_output.py)."""

from __future__ import annotations

from typing import Any

import pytest

from agentq.orchestrator.core.model_output import model_output

pytestmark = pytest.mark.unit

IMAGE = {"type": "media", "media_type": "image/png", "data": "iVBO"}


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        (None, None),
        ("text", "text"),
        (["a", {"type": "text", "text": "b"}], "a\nb"),
        (["a", IMAGE], {"content": [{"type": "text", "text": "a"}, IMAGE]}),
        ({"content": [IMAGE]}, {"content": [IMAGE]}),
        ([{**IMAGE, "data": b"\x89PNG"}], {"content": [{**IMAGE, "data": "iVBORw=="}]}),
    ],
)
def test_answers(answer: Any, expected: Any) -> None:
    assert model_output(answer) == expected


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (3, "returned int, not text, a list of text and media parts, or None"),
        ({"rows": 3}, "returned dict, not text, a list of text and media parts, or None"),
        ([1], 'part 0 is 1, not text or {"type": "media", "media_type": ..., "data": ...}'),
        ([{"type": "media", "media_type": "image/png"}], "part 0 is {'type': 'media'"),
    ],
)
def test_other_answers_are_refused_in_one_line(answer: Any, message: str) -> None:
    with pytest.raises(TypeError) as raised:
        model_output(answer)
    assert str(raised.value).startswith(message)
    assert "\n" not in str(raised.value)
