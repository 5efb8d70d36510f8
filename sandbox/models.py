"""The sandbox's data: what a caller asks for and what it gets back.

Everything here is plain data validated by pydantic; invalid requests raise
`InvalidRequestError` (a `ValueError`) naming the field, so the worker can hand
the message to the model unchanged.
"""

from __future__ import annotations

import posixpath
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from agentq.sandbox.errors import InvalidRequestError

Language = Literal["python", "javascript"]
LANGUAGES: tuple[Language, ...] = ("python", "javascript")

# Upper bounds a request may ask for. An operator narrows them further in
# `SandboxConfig`; these only stop absurd values reaching Docker.
_MAX_TIMEOUT_S = 3600.0
_MAX_MEMORY_MB = 16_384
_MAX_FILES = 256
_MAX_FILE_CHARS = 10_000_000


class Limits(BaseModel):
    """Resource limits of one call. `output_bytes` applies to each stream."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    timeout_s: float = Field(default=30.0, gt=0, le=_MAX_TIMEOUT_S)
    memory_mb: int = Field(default=256, ge=32, le=_MAX_MEMORY_MB)
    cpus: float = Field(default=1.0, gt=0, le=64)
    output_bytes: int = Field(default=64_000, ge=1, le=100_000_000)
    pids: int = Field(default=128, ge=8, le=4096)
    workdir_mb: int = Field(default=64, ge=1, le=8192)
    tmp_mb: int = Field(default=16, ge=1, le=1024)
    shm_mb: int = Field(default=16, ge=1, le=1024)
    open_files: int = Field(default=256, ge=32, le=65_536)
    artifact_bytes: int = Field(default=2_000_000, ge=0, le=100_000_000)
    artifacts_total_bytes: int = Field(default=8_000_000, ge=0, le=500_000_000)
    max_artifacts: int = Field(default=32, ge=0, le=1000)

    def container_shape(self) -> tuple[int, float, int, int, int, int, int]:
        """The limits fixed when a container is created (the rest apply per call)."""
        return (
            self.memory_mb,
            self.cpus,
            self.pids,
            self.workdir_mb,
            self.tmp_mb,
            self.shm_mb,
            self.open_files,
        )


class ExecRequest(BaseModel):
    """Run `code` in `language`, with `files` (relative path -> text) in the work dir."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    language: Language
    code: str
    files: dict[str, str] = Field(default_factory=dict)
    limits: Limits = Field(default_factory=Limits)
    network: bool = False

    @field_validator("code")
    @classmethod
    def _check_code(cls, code: str) -> str:
        return check_unicode(code, "the code")

    @field_validator("files")
    @classmethod
    def _check_files(cls, files: dict[str, str]) -> dict[str, str]:
        if len(files) > _MAX_FILES:
            raise ValueError(f"at most {_MAX_FILES} files")
        for path, text in files.items():
            check_relative_path(check_unicode(path, "a file path"))
            check_unicode(text, repr(path))
            if len(text) > _MAX_FILE_CHARS:
                raise ValueError(f"{path!r} is longer than {_MAX_FILE_CHARS} characters")
        return files

    @classmethod
    def parse(cls, data: object) -> ExecRequest:
        """Validate untrusted data (e.g. a tool call's JSON); same errors as the constructor."""
        if not isinstance(data, dict) or not all(isinstance(key, str) for key in data):
            raise InvalidRequestError("request", "must be a JSON object")
        return cls(**data)

    def __init__(self, **data: Any) -> None:
        # Construction is the one entry point (`parse` goes through it), so every
        # invalid request raises InvalidRequestError naming its field.
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise invalid_request(exc) from None


def check_unicode(text: str, what: str) -> str:
    """Refuse lone surrogates: they cannot be encoded, so no file or program can hold them."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"{what} contains a lone surrogate (not valid Unicode)") from None
    return text


def check_relative_path(path: str) -> str:
    """Accept a normalised relative POSIX path that stays inside its root."""
    if not path or "\x00" in path:
        raise ValueError(f"{path!r} is not a valid path")
    if path.startswith("/"):
        raise ValueError(f"{path!r} is absolute; use a path relative to the work directory")
    parts = path.split("/")
    if any(part in ("..", ".", "") for part in parts) or posixpath.normpath(path) != path:
        raise ValueError(f"{path!r} must be a plain relative path without '.', '..' or '//'")
    return path


def invalid_request(exc: ValidationError) -> InvalidRequestError:
    first = exc.errors()[0]
    field = ".".join(str(part) for part in first["loc"]) or "request"
    message = str(first["msg"]).removeprefix("Value error, ")
    return InvalidRequestError(field, message)


class Artifact(BaseModel):
    """A file the code wrote under its output directory."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    path: str  # relative to the output directory
    size: int = Field(ge=0)
    media_type: str
    text: str | None = None  # set for UTF-8 text files
    data_base64: str | None = None  # set for everything else
    is_image: bool = False  # png/jpeg/gif/webp: a model can be shown it

    @field_validator("path")
    @classmethod
    def _check_path(cls, path: str) -> str:
        return check_relative_path(check_unicode(path, "the path"))


class ExecResult(BaseModel):
    """What a call produced. `error` explains any kill in one sentence."""

    model_config = ConfigDict(extra="forbid")

    exit_code: int | None  # None: the process was killed before it could exit
    stdout: str = ""
    stderr: str = ""
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    duration_s: float = 0.0
    timed_out: bool = False
    value: str | None = None  # Python: repr of the final expression, if any
    artifacts: list[Artifact] = Field(default_factory=list)
    notices: list[str] = Field(default_factory=list)  # e.g. artifacts refused, and why
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and self.exit_code == 0
