"""The loader folds the constants chunk's flat tables into the script (no Redis needed):
each `T.NAME` becomes its literal, so Redis builds no table of constants per call, and a
table the script still names as a whole stays as written."""

from __future__ import annotations

import pytest

from agentq.orchestrator.machine import scripts

pytestmark = pytest.mark.unit

CHUNK = (
    'local RUN = {RUNNING = "running", DONE = "done"}\n'
    "local FAIR = {OFFSET = 1125899906842624, LOW = -5}\n"
    'local S = {RUN = "r:", CALL = "c:"}\n'
    'local USAGE = {{"input_tokens", "u_in"}}\n'
)


def test_uses_become_literals_and_the_tables_go() -> None:
    source = CHUNK + "return {RUN.RUNNING, S.CALL .. RUN.DONE, x-FAIR.LOW, FAIR.OFFSET}\n"
    folded = scripts.fold(source)
    assert folded == (
        'local USAGE = {{"input_tokens", "u_in"}}\n'
        'return {"running", "c:" .. "done", x-(-5), (1125899906842624)}\n'
    )


def test_a_table_named_as_a_whole_stays() -> None:
    source = CHUNK + "for k, v in pairs(RUN) do end\nreturn RUN.DONE, S.RUN\n"
    folded = scripts.fold(source)
    assert 'local RUN = {RUNNING = "running", DONE = "done"}' in folded
    assert "RUN.DONE" in folded  # a kept table is read as written
    assert '"r:"' in folded
    assert "local S =" not in folded


def test_a_comment_naming_a_table_keeps_it_not() -> None:
    source = CHUNK + "-- RUN and S, in prose\nreturn RUN.DONE, S.CALL -- RUN again\n"
    assert "local RUN =" not in scripts.fold(source)
    # A string that spells the name keeps it (the loader does not parse strings: kept
    # is always safe).
    assert "local RUN =" in scripts.fold(CHUNK + 'return "RUN", RUN.DONE\n')


def test_an_unknown_name_is_left_for_lua_to_refuse() -> None:
    folded = scripts.fold(CHUNK + "return RUN.NOPE\n")
    assert "RUN.NOPE" in folded
    assert "local RUN =" in folded


def test_a_longer_name_or_a_field_spelling_a_table_is_not_its_use() -> None:
    source = CHUNK + "return XRUN.DONE, t.RUN.DONE, RUN.DONE\n"
    assert scripts.fold(source).endswith('return XRUN.DONE, t.RUN.DONE, "done"\n')
    # Only a name of its own keeps the table: `FAIRNESS` and `t.FAIR` are not `FAIR`.
    kept = scripts.fold(CHUNK + "return FAIRNESS, t.FAIR, FAIR.LOW\n")
    assert "local FAIR =" not in kept
    assert "local FAIR =" in scripts.fold(CHUNK + "return FAIRNESS, FAIR, FAIR.LOW\n")
