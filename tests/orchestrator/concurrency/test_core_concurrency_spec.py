"""A spec's `concurrency` (orchestrator/concurrency/spec.py), pure: what is refused when
the spec is read (a bad max, a key that is not one, a key_from that is not a bounded
JMESPath, both or neither), and the key a key_from finds in the metadata at submit."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from agentq.orchestrator.concurrency.spec import Concurrency
from agentq.orchestrator.core.errors import SpecError
from agentq.orchestrator.spec.run import RunSpec
from tests.support.specs import scripted

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("concurrency", "error"),
    [
        ({"key": "user-42", "max": 0}, "greater than or equal to 1"),
        ({"key": "user-42", "max": 10_001}, "less than or equal to 10000"),
        ({"key": "u" * 129, "max": 2}, "a concurrency key is 1-128 letters"),
        ({"key": "a b", "max": 2}, "a concurrency key is 1-128 letters"),
        ({"key_from": "metadata.[", "max": 2}, "not a valid JMESPath expression"),
        ({"key_from": "m" * 5000, "max": 2}, "an expression is at most"),
        ({"key": "a", "key_from": "metadata.user", "max": 2}, "exactly one of 'key'"),
        ({"max": 2}, "exactly one of 'key'"),
        ({"key": "a"}, "Field required"),
    ],
)
def test_a_bad_concurrency_is_refused_when_the_spec_is_read(
    concurrency: dict[str, Any], error: str
) -> None:
    with pytest.raises(ValidationError) as raised:
        RunSpec.model_validate(scripted({"text": "hi"}, concurrency=concurrency))
    assert error in str(raised.value)


@pytest.mark.parametrize(
    ("key_from", "metadata", "key"),
    [
        ("metadata.user", {"user": "user-42"}, "user-42"),
        ("metadata.org.id", {"org": {"id": 7}}, "7"),
        ("join('.', [metadata.org, metadata.user])", {"org": "o", "user": "u"}, "o.u"),
    ],
)
def test_key_from_finds_the_key_in_the_metadata(
    key_from: str, metadata: dict[str, Any], key: str
) -> None:
    assert Concurrency(key_from=key_from, max=1).resolved(metadata) == key


@pytest.mark.parametrize(
    ("key_from", "metadata", "error"),
    [
        ("metadata.user", {}, "concurrency.key_from: 'metadata.user' gives None, not a key"),
        ("metadata.user", {"user": "a b"}, "gives 'a b', not a key (1-128 letters"),
        ("metadata.user", {"user": ["x"]}, "gives ['x'], not a key"),
        ("metadata.user", {"user": True}, "gives True, not a key"),
        ("join('', metadata.users)", {"users": [1]}, "concurrency.key_from: "),
    ],
)
def test_key_from_that_finds_no_key_is_one_line(
    key_from: str, metadata: dict[str, Any], error: str
) -> None:
    with pytest.raises(SpecError) as raised:
        Concurrency(key_from=key_from, max=1).resolved(metadata)
    assert error in raised.value.message
    assert "\n" not in raised.value.message


def test_a_spec_may_not_choose_a_placed_id() -> None:
    with pytest.raises(ValidationError, match="placed by a concurrency key"):
        RunSpec.model_validate(scripted({"text": "hi"}, id="c0123456789ab.mine"))
