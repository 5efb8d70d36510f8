"""The one loader of agentq's Lua: a script's file, its machine's prelude and the
generated constants before it, and the shared helpers it asks for pulled in.

Every `.lua` file lives next to the feature that owns it (`orchestrator/runs/lua/`,
`workers/queue/lua/`, …) and opens with a header: `-- NAME: what it does`, then its
KEYS, ARGV, replies and effects. A helper written once for every machine (`reply`,
`emit`, `enqueue`, `wake`) is an include in `orchestrator/machine/lua/`: a line
`-- @include NAME` in a script or a prelude is replaced by that file, once per script
(as BullMQ's `commands/includes/`), so each script still travels to Redis whole.

The constants chunk's flat tables (`local F = {STATUS = "status", ...}`) are folded
into the script when it is loaded: each `F.STATUS` becomes its literal and the table's
line goes. Redis runs a script's whole body on every call, and building those tables
(a few hundred entries) cost more than the commands of a short transition; a table a
script still names as a whole (`ipairs(USAGE)`) is kept as written.

For the same reason a definition the script never uses is dropped (`prune`): a prelude
and its includes define every helper any transition needs (a closure or a table built
on each call), and a short transition uses a few of them.

A machine's scripts are built when first asked for, not when its store module is
imported (`Scripts`): building all of them (expand, fold, prune) was a few tenths of a
second of every process's start-up, and a CLI command or a worker sends a few of them.
"""

from __future__ import annotations

import collections
import functools
import hashlib
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from importlib import resources

INCLUDES_PACKAGE = "agentq.orchestrator.machine"

# `-- @include NAME` alone on its line.
INCLUDE_LINE = re.compile(r"^-- @include (\w+)[ \t]*$", re.MULTILINE)

# A flat table of constants as the chunks render it, alone on its line (lua_constants.py:
# `_table`, fairness.py: `lua_chunk`), and one of its entries.
_LITERAL = r'"(?:[^"\\]|\\.)*"|-?\d+'
FLAT_TABLE = re.compile(
    rf"^local ([A-Z][A-Z0-9_]*) = \{{((?:[A-Z][A-Z0-9_]* = (?:{_LITERAL})(?:, )?)*)\}}$",
    re.MULTILINE,
)
_ENTRY = re.compile(rf"([A-Z][A-Z0-9_]*) = ({_LITERAL})")


def read(package: str, name: str) -> str:
    """The text of `lua/NAME.lua` in `package`, as written."""
    return (resources.files(package) / "lua" / f"{name}.lua").read_text()


def include(name: str) -> str:
    """The text of the shared helper NAME, as written."""
    return read(INCLUDES_PACKAGE, name)


def included(source: str) -> list[str]:
    """The includes a source asks for itself, in order."""
    return INCLUDE_LINE.findall(source)


def expand(source: str, done: set[str] | None = None) -> str:
    """`source` with each include line replaced by its helper (and the helpers that one
    asks for before it); a helper already pulled in is not repeated."""
    seen = set() if done is None else done

    def _pull(match: re.Match[str]) -> str:
        name = match.group(1)
        if name in seen:
            return ""
        seen.add(name)
        return expand(include(name), seen).rstrip("\n")

    return INCLUDE_LINE.sub(_pull, source)


class Scripts(Mapping[str, str]):
    """A machine's scripts by name, each one's full source built on first use and kept
    (see the top): its names are known at once, its sources when asked for."""

    def __init__(self, names: Iterable[str], build: Callable[[str], str]) -> None:
        self._names = sorted(set(names))
        self._build = build
        self._built: dict[str, str] = {}

    def __getitem__(self, name: str) -> str:
        source = self._built.get(name)
        if source is None:
            if name not in self._names:
                raise KeyError(name)
            source = self._built[name] = self._build(name)
        return source

    def __contains__(self, name: object) -> bool:  # (Mapping's would build it)
        return name in self._names

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)


def load(
    package: str, names: Iterable[str], *, constants: str = "", prelude: str | None = None
) -> Scripts:
    """Each script's full source: `constants` (a chunk rendered from the declared
    state), then the prelude's file and the script's own, includes expanded; each built
    when first asked for."""

    @functools.cache
    def head() -> str:
        return constants + (read(package, prelude) + "\n" if prelude else "")

    def build(name: str) -> str:
        flags, own = shebang(read(package, name))
        return flags + prune(fold(expand(head() + own)))

    return Scripts(names, build)


def shebang(source: str) -> tuple[str, str]:
    """A script file's shebang line (Redis 7's `#!lua flags=...`, which must open the
    script sent, before its constants and prelude), newline included, or "", and the
    rest of the file."""
    if not source.startswith("#!"):
        return "", source
    line, _, rest = source.partition("\n")
    return line + "\n", rest


# Cached (as `_flat_table`): every script repeats the constants chunk and its prelude, and
# `fold` rescans the whole script for each table, so the same lines come back thousands of
# times in each process that loads the scripts (an `agentq worker`'s start-up).
@functools.cache
def _code(line: str) -> str:
    """A line without its comment (a `--` outside a string literal)."""
    at = 0
    while (at := line.find("--", at)) >= 0:
        before = line[:at]
        if before.count('"') % 2 == 0 and before.count("'") % 2 == 0:
            return before
        at += 2
    return line


# A character that continues a name or makes it a field: `XF.A` or `t.F.A` is not `F.A`.
_NAME_CHAR = re.compile(r"[\w.]")


def _inside_name(found: re.Match[str]) -> bool:
    """Whether a match of a table's name is part of a longer name or a field. (Checked
    after a plain search rather than as a lookbehind: a pattern that opens with a
    literal is searched for by its prefix, and a lookbehind first tried at every
    position made folding most of a worker's start-up.)"""
    at = found.start()
    return at > 0 and _NAME_CHAR.match(found.string, at - 1) is not None


@functools.cache
def _flat_table(line: str) -> bool:
    """Whether a line is a flat constant table alone (see `_code` for the cache)."""
    return FLAT_TABLE.fullmatch(line) is not None


def fold(source: str) -> str:
    """`source` with each flat constant table folded into its uses (see the top)."""
    for table in FLAT_TABLE.finditer(source):
        name, line = table.group(1), table.group(0)
        values = dict(_ENTRY.findall(table.group(2)))
        rest = source.replace(line + "\n", "", 1)

        def _literal(use: re.Match[str], values: dict[str, str] = values) -> str:
            value = values.get(use.group(1))
            if value is None or _inside_name(use):
                return use.group(0)
            # A number in parentheses: `x -` before `-1` must not become a comment.
            return value if value.startswith('"') else f"({value})"

        folded = re.sub(rf"{name}\.(\w+)", _literal, rest)
        # (another table's entries may share the name: `S = {CALL = "c:"}`); only the lines
        # that spell the name can (a script has hundreds of lines and tables)
        code = "\n".join(
            _code(line) for line in folded.splitlines() if name in line and not _flat_table(line)
        )
        if all(_inside_name(bare) for bare in re.finditer(rf"{name}\b", code)):
            source = folded
    return source


# A top-level definition as the Lua files write them: a function from its line to the
# first `end` at the start of a line, or a local on one line (a name and a value whose
# brackets close on it). Its name and its text, the newline included.
_DEFINITION = re.compile(
    r"^local function (\w+)\(.*?^end[ \t]*(?:--[^\n]*)?\n|^local (\w+) = ([^\n]*)\n",
    re.MULTILINE | re.DOTALL,
)


def _pure(value: str) -> bool:
    """Whether a one-line local's value can be dropped unread: it calls no command and
    its brackets close on its line (a table or a call spread over lines is kept)."""
    code = _code(value)
    return "redis." not in code and all(
        code.count(a) == code.count(b) for a, b in ("()", "{}", "[]")
    )


def prune(source: str) -> str:
    """`source` without the top-level definitions nothing else in it names (see the top),
    until none is left; a name spelled in a string keeps its definition (kept is safe)."""
    uses = _names(source)
    left = [
        (found.group(1) or found.group(2), found.group(0), _names(found.group(0)))
        for found in _DEFINITION.finditer(source)
        if (found.group(1) and not _DEFINITION.search(found.group(0), 1)) or _pure(found.group(3))
    ]
    while unused := [d for d in left if uses[d[0]] == d[2][d[0]]]:
        for definition in unused:
            left.remove(definition)
            uses -= definition[2]
            source = source.replace(definition[1], "", 1)
    return source


# A name as code uses it: not a table's field (`t.name`), not part of a longer name.
_NAME = re.compile(r"(?<![\w.])[A-Za-z_]\w*")


def _names(source: str) -> collections.Counter[str]:
    """How often each name occurs in `source`'s code (its comments left out)."""
    return collections.Counter(_NAME.findall("\n".join(map(_code, source.splitlines()))))


def followed(source: str, after: str) -> str | None:
    """`source` run as a function, then `after` when it returned, and `source`'s reply
    returned: one script where two calls went (a worker's job end riding in its last
    transition: workers/queue/claims.py, `ending`). `source`'s every `return` ends only
    its function, and an error it raises ends the whole call before `after`. None for a
    script under a shebang (its flags say what Redis lets it do: another script's writes
    must not ride under them)."""
    if source.startswith("#!"):
        return None
    return f"local __reply = (function()\n{source}\nend)()\n{after}\nreturn __reply\n"


def script(package: str, name: str) -> str:
    """One script that needs no constants and no prelude (a worker's own)."""
    return load(package, [name])[name]


@functools.cache
def sha(source: str) -> str:
    """A script's SHA1, as EVALSHA names it."""
    return hashlib.sha1(source.encode(), usedforsecurity=False).hexdigest()
