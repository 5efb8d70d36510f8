from __future__ import annotations

import pytest

from agentq.workers.models.ratelimit import Limits, learned_from_headers, parse_reset

pytestmark = pytest.mark.unit

NOW = 1_700_000_000.0


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("1s", 1.0),
        ("20ms", 0.02),
        ("6m0s", 360.0),
        ("1h2m3s", 3723.0),
        ("2023-11-14T22:13:30Z", 10.0),
        ("2023-11-14T22:13:10Z", 0.0),
        ("soon", None),
    ],
)
def test_parse_reset(value: str, expected: float | None) -> None:
    assert parse_reset(value, NOW) == expected


@pytest.mark.parametrize(
    ("headers", "limits", "backoff"),
    [
        ({}, Limits(), None),
        (
            {"x-ratelimit-limit-requests": "60", "x-ratelimit-limit-tokens": "150000"},
            Limits(60, 150000),
            None,
        ),
        (
            {
                "anthropic-ratelimit-requests-limit": "50",
                "anthropic-ratelimit-input-tokens-limit": "40000",
            },
            Limits(50, 40000),
            None,
        ),
        (
            {
                "x-ratelimit-limit-requests": "60",
                "x-ratelimit-remaining-requests": "0",
                "x-ratelimit-reset-requests": "2s",
            },
            Limits(60, None),
            2.0,
        ),
        (
            {
                "anthropic-ratelimit-requests-remaining": "0",
                "anthropic-ratelimit-requests-reset": "2023-11-14T22:13:25Z",
            },
            Limits(),
            5.0,
        ),
    ],
)
def test_learned_from_headers(
    headers: dict[str, str], limits: Limits, backoff: float | None
) -> None:
    assert learned_from_headers(headers, NOW) == (limits, backoff)
