"""Keys echoed back by a server are scrubbed whole, cut, URL-encoded or in base64."""

from __future__ import annotations

import base64
from urllib.parse import quote

import pytest

from agentq.workers.models.redact import redact

pytestmark = pytest.mark.unit

KEY = "sk-SECRET-CANARY-0123456789abcdef"


@pytest.mark.parametrize(
    "echo",
    [
        KEY,
        "sk-SECRET-CANA**",
        "****0123456789abcdef",
        KEY[:12] + "...",
        quote(KEY, safe=""),
        base64.b64encode(KEY.encode()).decode(),
        base64.urlsafe_b64encode(KEY.encode()).decode(),
        base64.b64encode(f"user:{KEY}".encode()).decode(),
        base64.b64encode(f"Bearer {KEY}".encode()).decode(),
        base64.b64encode(f"ab{KEY}".encode()).decode(),
    ],
)
def test_every_echo_is_scrubbed(echo: str) -> None:
    text = redact(f"invalid key: {echo} (check it)", [KEY])
    assert "[redacted]" in text
    assert KEY[:8] not in text
    assert KEY[-8:] not in text
    assert text.startswith("invalid key: ")
    assert text.endswith(" (check it)")


def test_ordinary_text_is_left_alone() -> None:
    text = "Invalid value for 'messages': expected an array (sk- keys start so)"
    assert redact(text, [KEY]) == text


def test_no_secret_no_change() -> None:
    assert redact(f"x {KEY}", [None, ""]) == f"x {KEY}"
