"""What a tool returns, made safe to store, send to a model and read back (pure).

A tool may return anything: bytes, NaN, objects, structures nested hundreds of
levels deep or tens of megabytes long. None of that may fail a run or leave a
stored result unreadable. `bounded_result` turns any output into plain JSON
data (or a tool error the model sees, when there is no faithful JSON form) and
caps its size, marking the cut where the model will see it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from pydantic_core import to_jsonable_python

from agentq.orchestrator.core.messages import ToolResultPart
from agentq.orchestrator.core.tool_errors import ToolErrorKind

DEFAULT_MAX_OUTPUT_BYTES = 1_000_000
# Deeper than any honest result; far below the recursion limits of the JSON
# readers downstream (Lua's cjson, pydantic, Python's json).
MAX_DEPTH = 64
# Progress values are shown live, not stored as results: keep them small.
MAX_PROGRESS_BYTES = 16_000


class UnusableOutput(Exception):
    """The output has no faithful JSON form; the message is for the model."""

    def __init__(self, message: str, kind: ToolErrorKind = ToolErrorKind.EXECUTION) -> None:
        super().__init__(message)
        self.kind = kind


def jsonable(value: Any, depth: int = 0) -> Any:
    """Plain JSON data for `value`, or UnusableOutput.

    Non-finite floats become their names ("NaN", "Infinity"), UTF-8 bytes
    become text, other objects their pydantic serialization or `str()`.
    """
    if depth > MAX_DEPTH:
        raise UnusableOutput(
            f"the output nests deeper than {MAX_DEPTH} levels", ToolErrorKind.OUTPUT_TOO_LARGE
        )
    if value is None or isinstance(value, (bool, int)):
        return value
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, str):
        return _valid_text(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        raw = bytes(value)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise UnusableOutput(
                f"the output is {len(raw):,} bytes that are not UTF-8 text "
                "(return text, or base64-encode binary data)"
            ) from None
    if isinstance(value, Mapping):
        return {_key(k): jsonable(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [jsonable(v, depth + 1) for v in value]
    try:
        converted = to_jsonable_python(value, fallback=_printable)
    except Exception:  # a model or dataclass that cannot serialize itself
        return _printable(value)
    return jsonable(converted, depth + 1)  # plain data now: no second trip through here


def _key(key: Any) -> str:
    return _valid_text(key) if isinstance(key, str) else _printable(key)


def _valid_text(text: str) -> str:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates cannot be stored as UTF-8
        return text.encode("utf-8", "replace").decode("utf-8")
    return text


def _printable(value: Any) -> str:
    try:
        return _valid_text(str(value))
    except Exception:
        return f"<unprintable {type(value).__name__}>"


def truncation_marker(size: int, limit: int) -> str:
    return f"\n…[truncated by agentq: the output was {size:,} bytes, the limit is {limit:,}]"


def capped(output: Any, max_bytes: int) -> tuple[Any, bool]:
    """`output` if its JSON form fits in `max_bytes`, else text cut to fit with a marker."""
    text = output if isinstance(output, str) else json.dumps(output, ensure_ascii=False)
    data = text.encode("utf-8")
    if len(data) <= max_bytes:
        return output, False
    marker = truncation_marker(len(data), max_bytes)
    keep = max(0, max_bytes - len(marker.encode("utf-8")))
    head = data[:keep].decode("utf-8", "ignore")  # never split a character
    return head + marker, True


def bounded_result(part: ToolResultPart, max_bytes: int) -> ToolResultPart:
    """The result as stored and sent: plain JSON, capped; unusable output is a tool error.
    An output over `max_bytes` is cut, not refused: the model still reads its head."""
    update: dict[str, Any] = {}
    try:
        output = jsonable(part.output)
        # What a to_model_output hook made of it is bounded the same way.
        seen = None if part.model_output is None else jsonable(part.model_output)
    except UnusableOutput as exc:
        output = f"the tool {part.tool_name!r} returned an unusable result: {exc}"
        seen = None
        update = {"is_error": True, "error_kind": exc.kind}
    output, _ = capped(output, max_bytes)
    if seen is not None:
        seen, _ = capped(seen, max_bytes)
    return part.model_copy(update={**update, "output": output, "model_output": seen})


def progress_value(value: Any) -> Any:
    """A progress update as shown in a `tool-progress` event."""
    try:
        output = jsonable(value)
    except UnusableOutput as exc:
        output = f"(unusable progress value: {exc})"
    return capped(output, MAX_PROGRESS_BYTES)[0]
