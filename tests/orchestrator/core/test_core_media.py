"""Media in tool outputs: extraction, caps, descriptions (orchestrator/core/media.py)."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from agentq.orchestrator.core.media import (
    Media,
    MediaLimits,
    as_text,
    decoded_size,
    has_media,
    result_text,
    text_and_media,
    tool_content,
)

pytestmark = pytest.mark.unit

PNG = base64.b64encode(b"\x89PNG" + b"\0" * 2044).decode()  # 2048 bytes
BIG = base64.b64encode(b"\0" * 6000).decode()


def media(data: str = PNG, media_type: str = "image/png", **kw: Any) -> dict[str, Any]:
    return {"type": "media", "media_type": media_type, "data": data, **kw}


def test_decoded_size() -> None:
    assert decoded_size(PNG) == 2048
    assert decoded_size(base64.b64encode(b"abcde").decode()) == 5


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        ("plain", False),
        ({"a": 1}, False),
        ({"content": [{"type": "text", "text": "t"}]}, False),
        ({"content": [media()]}, True),
        ({"artifacts": [media(path="/work/out/a.png")]}, True),
        ({"content": [{"type": "media", "media_type": "image/png"}]}, False),  # no data
    ],
)
def test_has_media(output: Any, expected: bool) -> None:
    assert has_media(output) is expected


@pytest.mark.parametrize("output", ["text", 3, {"a": [1, 2]}, None, {"content": "x"}])
def test_outputs_without_media_read_as_before(output: Any) -> None:
    expected = output if isinstance(output, str) else json.dumps(output)
    assert tool_content(output, "c1") == [expected]


def test_content_parts_in_order() -> None:
    output = {
        "content": [
            {"type": "text", "text": "before"},
            media(),
            {"type": "resource-link", "uri": "file:///x", "name": "x"},
            media(media_type="image/jpeg"),
        ]
    }
    items = tool_content(output, "call_0_1")
    assert items == [
        "before",
        Media("call_0_1#0", "image/png", PNG, 2048),
        json.dumps({"type": "resource-link", "uri": "file:///x", "name": "x"}),
        Media("call_0_1#1", "image/jpeg", PNG, 2048),
    ]
    assert as_text(items).splitlines() == [
        "before",
        "[image: image/png, 2 kB, call_0_1#0]",
        '{"type": "resource-link", "uri": "file:///x", "name": "x"}',
        "[image: image/jpeg, 2 kB, call_0_1#1]",
    ]


def test_code_tool_artifacts_become_references_in_the_text() -> None:
    output = {
        "exit_code": 0,
        "stdout": "plotted",
        "artifacts": [media(path="/work/out/plot.png"), {"path": "/work/out/data.csv", "size": 9}],
    }
    first, image = tool_content(output, "c7")
    assert image == Media("c7#0", "image/png", PNG, 2048)
    assert json.loads(str(first)) == {
        "exit_code": 0,
        "stdout": "plotted",
        "artifacts": [
            {"path": "/work/out/plot.png", "media_type": "image/png", "ref": "c7#0"},
            {"path": "/work/out/data.csv", "size": 9},
        ],
    }
    assert PNG not in result_text(output, "c7")


@pytest.mark.parametrize(
    ("parts", "limits", "expected"),
    [
        pytest.param(
            [media(BIG)],
            MediaLimits(max_item_bytes=4096),
            ["[image omitted: image/png, 6 kB over the 4 kB cap, c#0]"],
            id="item-cap",
        ),
        pytest.param(
            [media(), media(), media()],
            MediaLimits(max_total_bytes=5000),
            [
                Media("c#0", "image/png", PNG, 2048),
                Media("c#1", "image/png", PNG, 2048),
                "[image omitted: image/png, 2 kB, the result's media would exceed 5 kB, c#2]",
            ],
            id="total-cap",
        ),
        pytest.param(
            [media("not base64 at all!")],
            MediaLimits(),
            ["[image omitted: image/png, not valid base64, c#0]"],
            id="bad-base64",
        ),
    ],
)
def test_caps_replace_media_by_a_note(
    parts: list[dict[str, Any]], limits: MediaLimits, expected: list[Any]
) -> None:
    assert tool_content({"content": parts}, "c", limits) == expected


def test_limits_from_model_options() -> None:
    assert MediaLimits.from_options({}) == MediaLimits()
    limits = MediaLimits.from_options({"media": {"max_item_bytes": 10}})
    assert limits == MediaLimits(max_item_bytes=10, max_total_bytes=MediaLimits().max_total_bytes)


def test_describe_sizes() -> None:
    assert (
        Media("r", "audio/wav", "", 3 * 1024 * 1024).describe() == "[audio: audio/wav, 3.0 MB, r]"
    )


def test_text_and_media_describes_each_item_and_keeps_what_the_api_takes() -> None:
    output = {
        "content": [
            {"type": "text", "text": "two files"},
            media(),
            media(BIG, "application/zip"),
        ]
    }
    text, kept = text_and_media(output, "c1", lambda m: m.is_image)
    assert text == (
        "two files\n[image: image/png, 2 kB, c1#0]\n[application: application/zip, 6 kB, c1#1]"
    )
    assert [(m.ref, m.media_type, m.data) for m in kept] == [("c1#0", "image/png", PNG)]
    assert text_and_media("plain", "c1", lambda m: True) == ("plain", [])
