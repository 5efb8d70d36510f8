"""One compiled JSON Schema (2020-12) validator per schema, shared by tool inputs and
run outputs: compiling is the cost, and the same few schemas are checked on every call."""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

from jsonschema import Draft202012Validator


def validator_for(schema: dict[str, Any]) -> Draft202012Validator:
    """The schema's validator; SchemaError if it is not a valid JSON Schema. Remote
    `$ref`s are never fetched (jsonschema's default registry retrieves nothing)."""
    return _compiled(json.dumps(schema, sort_keys=True))


@lru_cache(maxsize=512)
def _compiled(schema_json: str) -> Draft202012Validator:
    schema = json.loads(schema_json)
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)
