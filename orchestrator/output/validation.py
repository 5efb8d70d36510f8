"""Is a value a valid output? Parsing a model's text as JSON, and the schema's verdict."""

from __future__ import annotations

import json
import re
from typing import Any

from agentq.orchestrator.core.json_schema import validator_for

# Models wrap JSON in a Markdown fence however firmly they are told not to.
_FENCE = re.compile(r"^```[A-Za-z0-9_-]*\s*\n(?P<body>.*?)\n?```$", re.DOTALL)


def schema_problems(schema: dict[str, Any], value: Any, *, limit: int = 5) -> list[str]:
    """Every way `value` violates `schema` (at most `limit`), each as `path: message`;
    empty when it matches. The schema was checked when the spec was."""
    validator = validator_for(schema)
    errors = sorted(validator.iter_errors(value), key=lambda e: [str(p) for p in e.path])
    return [f"{'/'.join(str(p) for p in e.path) or '(root)'}: {e.message}" for e in errors[:limit]]


def parse_json_text(text: str) -> Any:
    """The JSON value a model's text holds (a fenced block's too); ValueError if none."""
    body = text.strip()
    fenced = _FENCE.match(body)
    if fenced:
        body = fenced.group("body").strip()
    try:
        return json.loads(body)
    except ValueError:
        pass
    # Prose around one object ("Here it is: {...}"): the outermost braces.
    start, end = body.find("{"), body.rfind("}")
    if 0 <= start < end:
        try:
            return json.loads(body[start : end + 1])
        except ValueError:
            pass
    raise ValueError("the answer is not JSON")
