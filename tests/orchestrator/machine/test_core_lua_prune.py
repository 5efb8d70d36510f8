"""The loader drops the top-level definitions a script never names (no Redis needed):
Redis runs a script's whole body on every call, so each helper of the prelude a short
transition does not use was a closure (or a table) built for nothing on each call."""

from __future__ import annotations

import pytest

from agentq.orchestrator.machine import scripts
from agentq.orchestrator.runs.store import load_scripts

pytestmark = pytest.mark.unit

SOURCE = """\
local USAGE = {{"input_tokens", "u_in"}}
local A = cjson.decode(ARGV[1])
local status = redis.call('HGET', KEYS[1], 'status')  -- a command: kept
local function helper(x)
  return x .. "!"
end
local function uses_usage()
  for _, pair in ipairs(USAGE) do end
end
local function only_in_a_comment()
  return 1
end
local function loud(x)
  return helper(x)
end
-- only_in_a_comment() is named here, in prose
return loud(A.text)
"""


def test_what_nothing_names_goes_and_what_its_users_named_goes_with_it() -> None:
    pruned = scripts.prune(SOURCE)
    assert "local function loud" in pruned
    assert "local function helper" in pruned  # named by a kept function
    assert "local A =" in pruned
    assert "local status =" in pruned  # a command is never dropped, used or not
    assert "only_in_a_comment()\n  return" not in pruned
    # uses_usage named nothing else: it goes, then USAGE, which only it named
    assert "uses_usage" not in pruned.replace("-- only", "")
    assert "local USAGE" not in pruned


def test_a_name_spelled_in_a_string_keeps_its_definition() -> None:
    source = 'local function kept()\n  return 1\nend\nreturn "kept"\n'
    assert scripts.prune(source) == source


def test_a_value_spread_over_lines_is_kept() -> None:
    source = "local T = {\n  a = 1,\n}\nreturn 1\n"
    assert scripts.prune(source) == source


def test_a_short_transition_builds_only_the_helpers_it_calls() -> None:
    emit = load_scripts()["emit"]
    defined = [line for line in emit.splitlines() if line.startswith("local function ")]
    assert [line.split("(")[0].removeprefix("local function ") for line in defined] == [
        "reply",
        "emit",
        "is_terminal",
    ]


def test_a_function_ends_at_its_own_end_a_comment_after_it_or_not() -> None:
    source = (
        "local function unused()\n  return 1\nend -- why\n"
        "local function used()\n  return 2\nend\n"
        "return used()\n"
    )
    assert scripts.prune(source) == "local function used()\n  return 2\nend\nreturn used()\n"
