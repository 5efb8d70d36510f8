"""Request validation: bad requests raise InvalidRequestError naming the field."""

from __future__ import annotations

import pytest

from agentq.sandbox.errors import InvalidRequestError
from agentq.sandbox.manager import check_ceiling
from agentq.sandbox.models import Artifact, ExecRequest, ExecResult, Limits, check_relative_path

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("data", "field", "words"),
    [
        ({"language": "ruby", "code": ""}, "language", "'python' or 'javascript'"),
        ({"language": "python"}, "code", "Field required"),
        ({"language": "python", "code": "", "files": {"/etc/passwd": ""}}, "files", "absolute"),
        ({"language": "python", "code": "", "files": {"../up": ""}}, "files", "'..'"),
        ({"language": "python", "code": "", "files": {"a/../../b": ""}}, "files", "'..'"),
        ({"language": "python", "code": "", "files": {"a//b": ""}}, "files", "'//'"),
        ({"language": "python", "code": "", "files": {"./a": ""}}, "files", "plain relative"),
        ({"language": "python", "code": "", "files": {".": ""}}, "files", "plain relative"),
        ({"language": "python", "code": "", "files": {"a": "\udc80"}}, "files", "surrogate"),
        ({"language": "python", "code": "", "files": {"\ud800": ""}}, "files", "surrogate"),
        ({"language": "python", "code": "'\ud800'"}, "code", "lone surrogate"),
        ({"language": "python", "code": "", "files": {"": ""}}, "files", "not a valid path"),
        ({"language": "python", "code": "", "files": {"a\x00": ""}}, "files", "not a valid"),
        (
            {"language": "python", "code": "", "limits": {"timeout_s": 0}},
            "limits.timeout_s",
            "greater than 0",
        ),
        ({"language": "python", "code": "", "limits": {"memory_mb": 1}}, "limits.memory_mb", ""),
        ({"language": "python", "code": "", "limits": {"bogus": 1}}, "limits.bogus", "Extra"),
        ({"language": "python", "code": "", "shell": True}, "shell", "Extra"),
    ],
)
def test_invalid_requests_name_the_field(data: dict[str, object], field: str, words: str) -> None:
    with pytest.raises(InvalidRequestError) as info:
        ExecRequest.parse(data)
    assert info.value.field == field
    assert words in str(info.value)
    assert isinstance(info.value, ValueError)
    with pytest.raises(ValueError, match=field.split(".")[0]):
        ExecRequest(**data)


def test_parse_wants_an_object() -> None:
    with pytest.raises(InvalidRequestError) as info:
        ExecRequest.parse(["python", "1"])
    assert info.value.field == "request"


def test_valid_request_defaults() -> None:
    request = ExecRequest(language="javascript", code="1", files={"a/b.txt": "x"})
    assert request.network is False
    assert request.limits == Limits()
    assert request.limits.timeout_s == 30
    assert request.limits.memory_mb == 256
    assert request.limits.output_bytes == 64_000


@pytest.mark.parametrize("path", ["a", "a/b", "out/c.png", "x..y", ".hidden", "a/.b/c"])
def test_relative_paths_accepted(path: str) -> None:
    assert check_relative_path(path) == path


def test_artifact_paths_are_checked_too() -> None:
    with pytest.raises(ValueError, match=r"'\.\.'"):
        Artifact(path="../x", size=0, media_type="text/plain", text="")


def test_container_shape_ignores_per_call_limits() -> None:
    assert Limits(timeout_s=1, output_bytes=10).container_shape() == Limits().container_shape()
    assert Limits(memory_mb=128).container_shape() != Limits().container_shape()


def test_result_ok() -> None:
    assert ExecResult(exit_code=0).ok
    assert not ExecResult(exit_code=1).ok
    assert not ExecResult(exit_code=None, error="Timed out").ok


def test_ceiling_names_the_field() -> None:
    check_ceiling(Limits(), Limits())
    with pytest.raises(InvalidRequestError) as info:
        check_ceiling(Limits(cpus=4), Limits(cpus=2))
    assert info.value.field == "limits.cpus"
