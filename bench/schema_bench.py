"""What checking a tool call's input against its JSON Schema costs per call: the
validator compiled on every call, against the validator compiled once and looked up by
the schema's content, the lookup's key made by `json.dumps` (before) and by orjson
(`core/json_schema.py: validator_for`, now), measured in one run.

    python bench/schema_bench.py [--calls 20000] [--quick]

Each figure is the median of 5 loops (this process's CPU time: the machine's other load
shows less than in wall time) of `loop/plan.py: validate_input`'s work (the
validator for the tool's schema, then every error of the input) on a small schema (two
numbers) and a medium one (a bounded pattern, an enum, an array of objects), inputs
valid. Prints µs per call and each against the compile-once-by-orjson figure.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import Any

_REPO = Path(__file__).resolve().parent.parent
if str(_REPO) not in sys.path:
    sys.path.insert(0, str(_REPO))

from jsonschema.protocols import Validator  # noqa: E402

from agentq.orchestrator.core import json_schema  # noqa: E402
from agentq.orchestrator.loop.plan import validate_input  # noqa: E402
from agentq.orchestrator.tools import ToolDef  # noqa: E402

SMALL = {
    "type": "object",
    "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
    "required": ["a", "b"],
    "additionalProperties": False,
}
MEDIUM = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "pattern": "^[a-z ]+$", "maxLength": 200},
        "limit": {"type": "integer", "minimum": 1, "maximum": 100},
        "filters": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"field": {"type": "string", "enum": ["a", "b", "c"]}, "value": {}},
                "required": ["field"],
            },
        },
    },
    "required": ["query"],
}
CASES: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "small": (SMALL, {"a": 1, "b": 2}),
    "medium": (MEDIUM, {"query": "hello world", "limit": 5, "filters": [{"field": "a"}]}),
}


def compiled_per_call(schema: dict[str, Any]) -> Validator:
    """The validator built for every call: what caching avoids."""
    return json_schema._compiled.__wrapped__(json.dumps(schema, sort_keys=True).encode())


@lru_cache(maxsize=512)
def _by_json_key(schema_json: str) -> Validator:
    return json_schema._compiled.__wrapped__(schema_json.encode())


def json_keyed(schema: dict[str, Any]) -> Validator:
    """validator_for before: cached, its key made by json.dumps(sort_keys=True)."""
    return _by_json_key(json.dumps(schema, sort_keys=True))


def per_call_us(lookup: Callable[[dict[str, Any]], Validator], case: str, calls: int) -> float:
    schema, value = CASES[case]
    loops = []
    for _ in range(5):
        started = time.process_time()
        for _ in range(calls):
            list(lookup(schema).iter_errors(value))
        loops.append((time.process_time() - started) / calls * 1e6)
    return statistics.median(loops)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=20_000, help="calls per timed loop")
    parser.add_argument("--quick", action="store_true", help="2,000 calls per loop")
    args = parser.parse_args()
    calls = 2000 if args.quick else args.calls
    for case, (schema, value) in CASES.items():  # the real path accepts these inputs
        validate_input(ToolDef(name=case, kind="function", input_schema=schema), value)
    ways = {
        "compiled per call": (compiled_per_call, max(1, calls // 100)),
        "cached, json.dumps key (before)": (json_keyed, calls),
        "cached, orjson key (validator_for)": (json_schema.validator_for, calls),
    }
    print(f"CPU µs per call (median of 5 loops; {calls} calls a loop, 1/100 of them compiling)")
    for case in CASES:
        figures = {name: per_call_us(lookup, case, n) for name, (lookup, n) in ways.items()}
        now = figures["cached, orjson key (validator_for)"]
        for name, us in figures.items():
            print(f"  {case:6} {name:36} {us:9.1f} µs  {us / now:6.2f}x")


if __name__ == "__main__":
    main()
