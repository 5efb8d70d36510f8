"""One compiled JSON Schema (2020-12) validator per schema, shared by tool inputs and
run outputs: compiling is the cost, and the same few schemas are checked on every call.

A schema may come from a run spec (its tools' inputs, its output), so its `pattern`
and `patternProperties` are a spec's regular expressions: checked as every such
pattern is when the validator is built, and matched with the same timeout
(core/spec_regex.py) instead of jsonschema's unbounded `re.search`. A match that runs
out of time is a validation error, so the value is refused wherever it was checked.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import orjson

from agentq.orchestrator.core import spec_regex
from agentq.orchestrator.core.expression_limits import ExpressionLimitError

# jsonschema (with attrs, referencing, rpds: ~0.1 s of CPU) loads with the first schema
# compiled: a process that reads runs without checking a schema (`agentq events`) never
# needs it.
if TYPE_CHECKING:
    from jsonschema import ValidationError
    from jsonschema.protocols import Validator


def validator_for(schema: dict[str, Any]) -> Validator:
    """The schema's validator; SchemaError if it is not a valid JSON Schema. Remote
    `$ref`s are never fetched (jsonschema's default registry retrieves nothing).

    Cached by the schema's content (its JSON, keys sorted), never by the dict's identity:
    a schema changed in place gets its own validator. The key is made on every call (a
    tool call's input is checked with it), so orjson makes it: a tenth of `json.dumps`'s
    cost, which was as much as the validation of a small input itself."""
    return _compiled(orjson.dumps(schema, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS))


def _matches(pattern: str, text: str) -> bool | str:
    """True, False, or why it could not tell (the match ran out of time)."""
    try:
        return spec_regex.search(pattern, text)
    except ExpressionLimitError as exc:
        return exc.message


def _invalid(message: str) -> ValidationError:
    from jsonschema import ValidationError  # loaded: a validator is what calls this

    return ValidationError(message)


def _pattern(
    validator: Validator, pattern: str, instance: Any, schema: dict[str, Any]
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "string"):
        return
    matched = _matches(pattern, instance)
    if matched is False:
        yield _invalid(f"{instance!r} does not match {pattern!r}")
    elif matched is not True:
        yield _invalid(str(matched))


def _pattern_properties(
    validator: Validator, patterns: dict[str, Any], instance: Any, schema: dict[str, Any]
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        for key, value in instance.items():
            matched = _matches(pattern, key)
            if matched is True:
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)
            elif matched is not False:
                yield _invalid(str(matched))


@lru_cache(maxsize=1)
def _bounded() -> type[Validator]:
    """Draft 2020-12 with the two keywords that match a spec's patterns bounded."""
    from jsonschema import Draft202012Validator, validators

    bounded: type[Validator] = validators.extend(
        Draft202012Validator, {"pattern": _pattern, "patternProperties": _pattern_properties}
    )
    return bounded


def _patterns(schema: Any) -> Iterator[str]:
    """Every `pattern` and `patternProperties` key, anywhere in the schema."""
    if isinstance(schema, list):
        for item in schema:
            yield from _patterns(item)
    elif isinstance(schema, dict):
        for key, value in schema.items():
            if key == "pattern" and isinstance(value, str):
                yield value
            elif key == "patternProperties" and isinstance(value, dict):
                yield from value
            yield from _patterns(value)


@lru_cache(maxsize=512)
def _compiled(schema_json: bytes) -> Validator:
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError

    schema = json.loads(schema_json)
    Draft202012Validator.check_schema(schema)
    for pattern in _patterns(schema):
        try:
            spec_regex.check_pattern(pattern)
        except ValueError as exc:
            raise SchemaError(f"pattern {pattern!r}: {exc}") from None
    validator: Validator = _bounded()(schema)
    return validator
