"""The one loader of agentq's Lua: a script's file, its machine's prelude and the
generated constants before it, and the shared helpers it asks for pulled in.

Every `.lua` file lives next to the feature that owns it (`orchestrator/runs/lua/`,
`workers/queue/lua/`, …) and opens with a header: `-- NAME: what it does`, then its
KEYS, ARGV, replies and effects. A helper written once for every machine (`reply`,
`emit`, `enqueue`, `wake`) is an include in `orchestrator/machine/lua/`: a line
`-- @include NAME` in a script or a prelude is replaced by that file, once per script
(as BullMQ's `commands/includes/`), so each script still travels to Redis whole.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from importlib import resources

INCLUDES_PACKAGE = "agentq.orchestrator.machine"

# `-- @include NAME` alone on its line.
INCLUDE_LINE = re.compile(r"^-- @include (\w+)[ \t]*$", re.MULTILINE)


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


def load(
    package: str, names: Iterable[str], *, constants: str = "", prelude: str | None = None
) -> dict[str, str]:
    """Each script's full source: `constants` (a chunk rendered from the declared
    state), then the prelude's file and the script's own, includes expanded."""
    head = constants + (read(package, prelude) + "\n" if prelude else "")
    return {name: expand(head + read(package, name)) for name in sorted(set(names))}


def script(package: str, name: str) -> str:
    """One script that needs no constants and no prelude (a worker's own)."""
    return load(package, [name])[name]
