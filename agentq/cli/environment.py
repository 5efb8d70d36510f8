"""The AGENTQ_* variables agentq reads, and a warning for any other one.

A misspelled variable would otherwise be ignored in silence and its setting keep its
default; the warning names the nearest known variable.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping

PREFIX = "AGENTQ_"
# Read outside the Settings model: by the CLI's options, `agentq serve`, tracing, and
# the sandbox's driver (inside its container, but harmless to know here).
OTHER_VARIABLES = frozenset(
    {
        "AGENTQ_API_KEYS",
        "AGENTQ_DEBUG",
        "AGENTQ_DRIVER_FDS",
        "AGENTQ_LOG_FORMAT",
        "AGENTQ_SERVE_EVENTS_PER_SECOND",
        "AGENTQ_SERVE_HEARTBEAT_S",
        "AGENTQ_SERVE_MAX_BODY_BYTES",
        "AGENTQ_SERVE_MAX_SPEC_BYTES",
        "AGENTQ_SERVE_SUBMITS_PER_MINUTE",
        "AGENTQ_TOKEN_SECRET",
        "AGENTQ_TRACE_CONTENT_MAX_CHARS",
    }
)


def known_variables(setting_names: Iterable[str]) -> frozenset[str]:
    return OTHER_VARIABLES | {PREFIX + name.upper() for name in setting_names}


def unknown_variable_warnings(environ: Mapping[str, str], known: frozenset[str]) -> list[str]:
    """One line per AGENTQ_* variable agentq does not read, naming the nearest it does."""
    lines = []
    for name in sorted(n for n in environ if n.startswith(PREFIX) and n not in known):
        near = difflib.get_close_matches(name, known, n=1)
        hint = f" (did you mean {near[0]}?)" if near else ""
        lines.append(f"warning: {name} is not a variable agentq reads: it is ignored{hint}")
    return lines
