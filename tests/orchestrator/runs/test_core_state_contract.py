"""The Lua transitions and the declared run state agree (no Redis needed).

Every `A.<field>` a script reads is a field of its input model (and every field is
read); every constant it names exists; the shapes Lua builds (the tool message, the
usage totals, a job) are the Python models'; each script opens with its header.
"""

from __future__ import annotations

import re
from importlib import resources

import pytest

from agentq.orchestrator.core.messages import (
    MESSAGE_ADAPTER,
    CostBreakdown,
    ToolMessage,
    ToolResultPart,
    Usage,
)
from agentq.orchestrator.machine import scripts
from agentq.orchestrator.machine.transition import ADDED_BY_STORE
from agentq.orchestrator.runs.state import (
    INPUTS,
    USAGE_FIELDS,
    CallRecord,
    QueuedJob,
    TransitionInput,
    history,
    lua_constants,
)
from agentq.orchestrator.runs.state.status import CHILD_COST_FIELDS, COST_FIELDS
from agentq.orchestrator.runs.store import load_scripts

pytestmark = pytest.mark.unit

LUA = resources.files("agentq.orchestrator.runs") / "lua"
# The prelude with the shared helpers it includes (orchestrator/machine/lua/).
PRELUDE = scripts.expand((LUA / "prelude.lua").read_text())
BASE_FIELDS = set(TransitionInput.model_fields) | ADDED_BY_STORE


def _source(model: type[TransitionInput]) -> str:
    return (LUA / f"{model.script}.lua").read_text()


def _code(source: str) -> str:
    """The source without its comments (headers name fields in prose)."""
    return "\n".join(line.split("--", 1)[0] for line in source.splitlines())


def _reads(source: str, table: str) -> set[str]:
    return set(re.findall(rf"\b{table}\.([A-Za-z_]\w*)", _code(source)))


@pytest.mark.parametrize("model", INPUTS, ids=lambda m: m.script)
def test_a_script_reads_exactly_its_input_fields(model: type[TransitionInput]) -> None:
    read = _reads(_source(model), "A") - BASE_FIELDS
    fields = set(model.model_fields) - BASE_FIELDS
    assert read - fields == set(), f"{model.script}.lua reads fields {model.__name__} lacks"
    assert fields - read == set(), f"{model.__name__} has fields {model.script}.lua never reads"


def test_the_prelude_reads_only_the_common_fields() -> None:
    assert _reads(PRELUDE, "A") == BASE_FIELDS


def test_nested_shapes_are_the_models() -> None:
    assert _reads(PRELUDE, "job") <= set(QueuedJob.model_fields)
    assert _reads((LUA / "commit_step.lua").read_text(), "c") <= set(CallRecord.model_fields)


@pytest.mark.parametrize("model", INPUTS, ids=lambda m: m.script)
def test_every_constant_a_script_names_exists(model: type[TransitionInput]) -> None:
    tables = {name: {m.name for m in enum} for name, enum in lua_constants.ENUM_TABLES.items()}
    tables["K"] = set(lua_constants.KEY_CONSTANTS)
    source = PRELUDE + _source(model)
    for table, names in tables.items():
        missing = _reads(source, table) - names
        assert not missing, f"{model.script}.lua names {table}.{missing} that do not exist"


# Literals a script may still spell: event types, the stream field, JSON punctuation,
# Lua's type names (a payload's shape checked before it is read).
ALLOWED_LITERALS = {"", "0-*", "e", "1", "[]", ",", "stop", "finish", "error", "abort"}
ALLOWED_LITERALS |= {"table", "string", "number"}
# A tool-results reference's carried order starts at its JSON's "["; a count is written "%d".
ALLOWED_LITERALS |= {"[", "%d"}


@pytest.mark.parametrize("model", INPUTS, ids=lambda m: m.script)
def test_scripts_spell_no_status_field_or_key_literally(model: type[TransitionInput]) -> None:
    literals = set(re.findall(r"'([^']*)'", _code(PRELUDE + _source(model))))
    commands = {lit for lit in literals if re.fullmatch(r"[A-Z]+", lit)}
    assert literals - commands - ALLOWED_LITERALS == set()


@pytest.mark.parametrize("model", INPUTS, ids=lambda m: m.script)
def test_every_script_opens_with_its_header(model: type[TransitionInput]) -> None:
    # (after its shebang, if it has one: Redis 7's flags, which open the script)
    lines = [line for line in _source(model).splitlines() if not line.startswith("#!")]
    assert lines[0].startswith(f"-- {model.script}: ")
    header = "\n".join(line for line in lines if line.startswith("--"))
    for part in ("-- KEYS", "-- ARGV", "-- Replies", "-- Effects"):
        assert part in header, f"{model.script}.lua has no {part!r} line"
    assert model.__name__ in header


def test_every_transition_loads_with_the_constants_first() -> None:
    # The chunk's lines, in order, less those a script never names (machine/scripts.py:
    # prune), then the prelude.
    loaded = load_scripts()
    assert set(loaded) == {m.script for m in INPUTS}
    head = scripts.fold(lua_constants.render()).splitlines()
    for source in loaded.values():
        _, source = scripts.shebang(source)  # Redis 7's flags open the script, if any
        before = source[: source.index("-- prelude: ")].splitlines()
        assert before == [line for line in head if line in before]
        assert before[0] == head[0]


def test_no_transition_builds_its_constant_tables_per_call() -> None:
    # Redis runs a script's whole body on each call: the flat tables are folded into
    # their uses at load time (machine/scripts.py: fold), so none is built per call.
    for name, source in load_scripts().items():
        built = [m.group(1) for m in scripts.FLAT_TABLE.finditer(source)]
        assert built == [], f"{name} builds {built} on every call"
        assert "F.STATUS" not in source
        assert '"status"' in source


def test_the_usage_lua_keeps_is_the_usage_model() -> None:
    # Tokens are counted field by field; the cost by kind, its total derived on reading.
    assert set(USAGE_FIELDS) | {"cost_usd", "cost_breakdown"} == set(Usage.model_fields)
    assert set(COST_FIELDS) == set(CHILD_COST_FIELDS) == set(CostBreakdown.model_fields)


def test_the_tool_message_the_join_writes_is_a_tool_message() -> None:
    open_, close = history.tool_message_frame()
    parts = [
        ToolResultPart(tool_call_id=f"c{i}", tool_name="t", output=i).model_dump_json()
        for i in range(2)
    ]
    message = MESSAGE_ADAPTER.validate_json(open_ + ",".join(parts) + close)
    assert isinstance(message, ToolMessage)
    assert [p.tool_call_id for p in message.content] == ["c0", "c1"]
