"""Every Lua script of the product follows one set of rules (no Redis needed).

Each `.lua` file opens with its header (`-- NAME: what it does`, then its KEYS, ARGV,
replies and effects; a shared helper says what it needs and defines instead). A
script uses a shared helper only by including it (`-- @include NAME`, expanded by
`orchestrator/machine/scripts.py`), includes only helpers that exist, and uses what
it includes. No Python module carries Lua of its own.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from agentq.orchestrator.machine import scripts
from tests.support.infra import REPO

pytestmark = pytest.mark.unit

ROOT = REPO
INCLUDES = ROOT / "orchestrator" / "machine" / "lua"
PRELUDES = {"prelude", "call_prelude"}
SCRIPTS = sorted(
    path
    for folder in ("orchestrator", "workers")
    for path in (ROOT / folder).rglob("lua/*.lua")
    if path.parent != INCLUDES
)
HELPERS = sorted(INCLUDES.glob("*.lua"))


def _code(source: str) -> str:
    return "\n".join(line.split("--", 1)[0] for line in source.splitlines())


def _header(source: str) -> tuple[str, str]:
    """(the first line after a shebang, the leading comment block)."""
    lines = [line for line in source.splitlines() if not line.startswith("#!")]
    leading = []
    for line in lines:
        if not line.startswith("--"):
            break
        leading.append(line)
    return lines[0], "\n".join(leading)


def _defines(helper: Path) -> set[str]:
    return set(re.findall(r"^local function (\w+)\(", helper.read_text(), re.MULTILINE))


DEFINED_BY = {path.stem: _defines(path) for path in HELPERS}


def _rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


def test_there_are_scripts_and_helpers() -> None:
    assert len(SCRIPTS) > 30
    assert {"reply", "emit", "enqueue", "wake", "clock"} <= set(DEFINED_BY)


@pytest.mark.parametrize("path", SCRIPTS, ids=_rel)
def test_every_script_opens_with_its_header(path: Path) -> None:
    first, header = _header(path.read_text())
    assert first.startswith(f"-- {path.stem}: "), f"{_rel(path)} does not open with its name"
    if path.stem in PRELUDES:
        parts: tuple[str, ...] = ("KEYS", "ARGV")
    else:
        parts = ("-- KEYS", "-- ARGV", "-- Replies", "-- Effects")
    for part in parts:
        assert part in header, f"{_rel(path)} has no {part!r} in its header"


@pytest.mark.parametrize("path", HELPERS, ids=_rel)
def test_every_helper_says_what_it_needs_and_defines(path: Path) -> None:
    first, header = _header(path.read_text())
    assert first.startswith(f"-- {path.stem}: ")
    assert "-- Needs:" in header
    assert DEFINED_BY[path.stem], f"{_rel(path)} defines no function"
    for name in DEFINED_BY[path.stem]:
        assert name in header, f"{_rel(path)} does not say it defines {name}"


def _own_includes(path: Path) -> set[str]:
    """What a script includes itself or through its machine's prelude."""
    names = set(scripts.included(path.read_text()))
    prelude = next(
        (path.parent / f"{p}.lua" for p in PRELUDES if (path.parent / f"{p}.lua").exists()),
        None,
    )
    if prelude is not None and path != prelude:
        names |= set(scripts.included(prelude.read_text()))
    return names


def _closure(names: set[str]) -> set[str]:
    found = set(names)
    for name in names:
        found |= _closure(set(scripts.included(scripts.include(name))))
    return found


@pytest.mark.parametrize("path", SCRIPTS + HELPERS, ids=_rel)
def test_a_script_includes_what_it_uses_and_uses_what_it_includes(path: Path) -> None:
    own = scripts.included(path.read_text())
    assert set(own) <= set(DEFINED_BY), f"{_rel(path)} includes {set(own) - set(DEFINED_BY)}"
    code = _code(path.read_text())
    declared = _closure(_own_includes(path))
    for helper, names in DEFINED_BY.items():
        if helper == path.stem and path.parent == INCLUDES:
            continue
        called = {n for n in names if re.search(rf"(?<![\w.]){n}\(", code)}
        if called:
            assert helper in declared, f"{_rel(path)} calls {called} without including {helper}"
    for helper in own:
        used = (
            any(re.search(rf"(?<![\w.]){n}\(", code) for n in DEFINED_BY[helper])
            or path.stem in PRELUDES
        )  # a prelude includes for its machine's scripts
        assert used, f"{_rel(path)} includes {helper} and uses none of it"


@pytest.mark.parametrize("path", SCRIPTS, ids=_rel)
def test_a_script_defines_no_shared_helper_again(path: Path) -> None:
    shared = set().union(*DEFINED_BY.values())
    mine = set(re.findall(r"^local function (\w+)\(", path.read_text(), re.MULTILINE))
    assert mine & shared == set(), f"{_rel(path)} writes {mine & shared} again"


def test_an_include_is_pulled_in_once_before_its_use() -> None:
    source = scripts.expand("-- @include enqueue\n-- @include wake\n-- @include enqueue\n")
    assert source.count("local function wake(") == 1
    assert source.count("local function enqueue(") == 1
    assert source.index("local function wake(") < source.index("local function enqueue(")
    assert "@include" not in source


def _python_lua(path: Path) -> list[str]:
    tree = ast.parse(path.read_text())
    return [
        node.value[:40]
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and "redis.call(" in node.value
    ]


def test_no_python_module_carries_lua() -> None:
    found = {
        _rel(path): lua
        for folder in ("orchestrator", "workers", "agentq")
        for path in (ROOT / folder).rglob("*.py")
        if not path.is_symlink() and (lua := _python_lua(path))
    }
    assert found == {}


def test_a_scripts_shebang_opens_the_script_sent() -> None:
    # Redis 7 reads a script's flags only from its first line: a file's shebang goes
    # before the constants and the prelude the loader puts ahead of its own text.
    from agentq.orchestrator.runs import store

    create = store._SCRIPTS["create"]
    assert create.startswith("#!lua flags=allow-cross-slot-keys\n")
    assert create.count("#!lua") == 1
    # A script without one is sent as before, and nothing may ride under its flags.
    assert not store._SCRIPTS["commit_step"].startswith("#!")
    assert scripts.followed(create, "return 1") is None
