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
        "AGENTQ_TOKEN_SECRET",
        "AGENTQ_TRACE_CONTENT_MAX_CHARS",
    }
)
# Read by the project's own deployment files (docker-compose.yml, the CI scripts) and
# named in the guide's shell examples: set in the same environment as agentq's own, so
# they must not be warned about either.
DEPLOYMENT_VARIABLES = frozenset(
    {
        "AGENTQ_API_PORT",
        "AGENTQ_DIND_IMAGE",
        "AGENTQ_GRAFANA_IMAGE",
        "AGENTQ_GRAFANA_PASSWORD",
        "AGENTQ_GRAFANA_PORT",
        "AGENTQ_HOOK_SECRET",
        "AGENTQ_IMAGE",
        "AGENTQ_IMAGES_DIR",
        "AGENTQ_KEY",
        "AGENTQ_METRICS_KEY",
        "AGENTQ_OTLP_ENDPOINT",
        "AGENTQ_PHOENIX_IMAGE",
        "AGENTQ_PHOENIX_PORT",
        "AGENTQ_PROMETHEUS_IMAGE",
        "AGENTQ_PROMETHEUS_PORT",
        "AGENTQ_REDIS_IMAGE",
        "AGENTQ_TOOLS",
        "AGENTQ_TOOLS_DIR",
        "AGENTQ_URL",
        "AGENTQ_WORKER_KEY",
    }
)
DEPLOYMENT_PREFIXES = ("AGENTQ_CI_", "AGENTQ_HELM_", "AGENTQ_PHOENIX_", "AGENTQ_TEST_")


# `agentq serve`'s limits, each `AGENTQ_SERVE_<NAME>` (agentq/serve/config.py `Limits`:
# named here because importing agentq.serve costs a CLI command ~0.7 s; a test keeps the
# two in step).
SERVE_LIMITS = (
    "max_body_bytes",
    "max_batch_bytes",
    "max_batch_lines",
    "max_spec_bytes",
    "batch_lines_per_minute",
    "events_per_second",
    "heartbeat_s",
    "redis_connections",
    "redis_wait_s",
    "max_streams",
    "streams_per_tenant",
    "list_scan_runs",
    "depth_sample_s",
)


def known_variables(setting_names: Iterable[str]) -> frozenset[str]:
    """The settings' variables, `agentq serve`'s limits, and the names read elsewhere."""
    return (
        OTHER_VARIABLES
        | DEPLOYMENT_VARIABLES
        | {PREFIX + name.upper() for name in setting_names}
        | {f"{PREFIX}SERVE_{name.upper()}" for name in SERVE_LIMITS}
    )


def unknown_variable_warnings(environ: Mapping[str, str], known: frozenset[str]) -> list[str]:
    """One line per AGENTQ_* variable agentq does not read, naming the nearest it does."""
    lines = []
    for name in sorted(
        n
        for n in environ
        if n.startswith(PREFIX) and n not in known and not n.startswith(DEPLOYMENT_PREFIXES)
    ):
        near = difflib.get_close_matches(name, known, n=1)
        hint = f" (did you mean {near[0]}?)" if near else ""
        lines.append(f"warning: {name} is not a variable agentq reads: it is ignored{hint}")
    return lines
