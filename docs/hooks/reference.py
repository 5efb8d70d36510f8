"""MkDocs hook: the configuration and CLI reference pages, built from the live objects.

Neither page is a file in docs/: at every build this hook reads the settings classes
(their fields, types, defaults and the comment above each field) and walks the click
command tree (every command's usage, help and options), and adds the two pages to the
site. A setting or an option added to the code shows up in the docs without anyone
editing them, and a setting without a description fails `mkdocs build --strict`.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import logging
import re
from typing import Any

import click
from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files

from agentq.cli.main import main as cli_main
from agentq.orchestrator.core.settings import Settings
from agentq.serve.config import Limits

log = logging.getLogger("mkdocs.plugins.agentq-reference")

CONFIGURATION_PAGE = "reference/configuration.md"
CLI_PAGE = "reference/cli.md"

# Settings fields the settings class leaves without a comment (the comment above a field
# is its description). A field with neither a comment nor an entry here is a warning,
# which `--strict` turns into a failed build.
FALLBACK = {
    "redis_url": "`redis://…`, `rediss://…`, `redis+cluster://host:port[,host:port…]` "
    "(see [Redis Cluster](../deploy/redis-cluster.md)), or `memory://NAME` for the "
    "embedded in-memory Redis.",
    "concurrency": "Jobs at once per queue per worker.",
    "mcp_config": "The MCP servers file: the `mcpServers` JSON of desktop clients "
    "(see [MCP tools](../tools/mcp.md)).",
}

# The same for the limits of `agentq serve` (the comment after a field is its description).
SERVE_FALLBACK = {
    "max_body_bytes": "Largest request body; larger is refused with 413.",
    "max_spec_bytes": "Largest run spec; larger is refused with 413.",
    "heartbeat_s": "An idle event stream sends a heartbeat this often.",
}


def on_files(files: Files, config: MkDocsConfig) -> Files:
    """Add the generated pages to the site's files (before the nav is built)."""
    for uri, text in ((CONFIGURATION_PAGE, configuration_page()), (CLI_PAGE, cli_page())):
        files.append(File.generated(config, uri, content=text))
    return files


# --- configuration -------------------------------------------------------------------


def field_comments(cls: type) -> dict[str, str]:
    """The `#` comment block above each `name: type` line of a class's source.

    A block describes the fields that follow it up to the next block (a comment may say
    what two or three related fields mean); a field that shares the block of the field
    before it maps to that field's name, as "see NAME"."""
    found: dict[str, str] = {}
    block: list[str] = []
    owner = ""
    after_field = False
    for line in inspect.getsource(cls).splitlines()[1:]:
        stripped = line.strip()
        if stripped.startswith("#"):
            if after_field:
                block, owner, after_field = [], "", False
            block.append(stripped.lstrip("#").strip())
            continue
        match = re.match(r"\s{4}(\w+)\s*:", line)
        if match and block:
            name = match.group(1)
            found[name] = f"see:{owner}" if owner else " ".join(block)
            owner = owner or name
            after_field = True
    return found


def inline_comments(cls: type) -> dict[str, str]:
    """The `# …` comment at the end of each `name: type = value` line of a class."""
    found: dict[str, str] = {}
    for line in inspect.getsource(cls).splitlines():
        match = re.match(r"\s{4}(\w+)\s*:[^#]*#\s*(.+)$", line)
        if match:
            found[match.group(1)] = match.group(2).strip()
    return found


def shown(value: Any) -> str:
    """A default as a reader would type it."""
    if value is None or value == "" or value == {}:
        return "—"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, dict):
        return f"`{json.dumps(value)}`"
    return f"`{value}`"


def cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def settings_rows() -> list[str]:
    comments = field_comments(Settings)
    prefix = str(Settings.model_config.get("env_prefix", ""))
    rows = []
    for name, field in Settings.model_fields.items():
        default = field.get_default(call_default_factory=True)
        kind = inspect.formatannotation(field.annotation)
        text = field.description or FALLBACK.get(name) or comments.get(name, "")
        if text.startswith("see:"):
            text = f"See `{prefix}{text[4:].upper()}` above."
        if not text:
            log.warning("%s.%s has no description (a comment above it)", Settings.__name__, name)
        rows.append(
            f"| `{prefix}{name.upper()}` | `{cell(kind)}` | {shown(default)} | {cell(text)} |"
        )
    return rows


def serve_rows() -> list[str]:
    """The `agentq serve` limits its command reads from `AGENTQ_SERVE_*` variables."""
    serve = cli_main.commands["serve"].callback
    source = inspect.getsource(serve) if serve else ""
    comments = inline_comments(Limits)
    rows = []
    for field in dataclasses.fields(Limits):
        if f'"{field.name}"' not in source:
            continue  # not read from the environment
        text = comments.get(field.name) or SERVE_FALLBACK.get(field.name, "")
        if not text:
            log.warning("Limits.%s has no description (a comment after it)", field.name)
        rows.append(
            f"| `AGENTQ_SERVE_{field.name.upper()}` | `{field.type}` | {shown(field.default)} "
            f"| {cell(text)} |"
        )
    return rows


def option_env_rows() -> list[str]:
    """Options of any command that also read an environment variable."""
    seen: dict[str, set[tuple[str, str]]] = {}
    helps: dict[str, str] = {}
    for path, command in walk(cli_main, "agentq"):
        for param in command.params:
            raw = param.envvar
            envvars = [raw] if isinstance(raw, str) else list(raw or [])
            for env in envvars:
                seen.setdefault(env, set()).add((path, param.opts[0]))
                helps.setdefault(env, getattr(param, "help", None) or "")
    rows = []
    for env, where in sorted(seen.items()):
        options = sorted({opt for _, opt in where})
        if len(where) > 3:  # a common option: say so rather than list every command
            shown_where = ", ".join(f"`{opt}`" for opt in options) + " of every command"
        else:
            shown_where = ", ".join(f"`{path} {opt}`" for path, opt in sorted(where))
        rows.append(f"| `{env}` | {shown_where} | {cell(helps[env])} |")
    return rows


def configuration_page() -> str:
    header = "| variable | type | default | meaning |\n|---|---|---|---|"
    return "\n".join(
        [
            "# Configuration reference",
            "",
            "<!-- Generated at build time by docs/hooks/reference.py from the settings"
            " classes: edit the code, not this page. -->",
            "",
            "agentq reads its settings from the environment, once, into one typed object"
            f" (`{Settings.__module__}.{Settings.__name__}`, a pydantic-settings class)."
            " Every process of a deployment (workers, `agentq serve`, submitters) should"
            " see the same values. A value that does not parse is refused with one line"
            " naming the variable (exit 2).",
            "",
            "## Settings",
            "",
            header,
            *settings_rows(),
            "",
            "## `agentq serve` limits",
            "",
            "Read by `agentq serve` at start; each is per process unless it says otherwise.",
            "",
            header,
            *serve_rows(),
            "",
            "## Command options with a variable",
            "",
            "These options of the CLI fall back to a variable when the option is not given.",
            "",
            "| variable | option | meaning |\n|---|---|---|",
            *option_env_rows(),
            "",
            "## Read elsewhere",
            "",
            "| variable | meaning |\n|---|---|",
            "| `AGENTQ_API_KEYS` | API keys of `agentq serve`: a file of lines"
            " `sha256:HEX TENANT [SCOPES]` (tenant keys) or"
            " `sha256:HEX worker:NAME queue:QUEUE[,…]` (worker keys), or the lines inline,"
            " `;`-separated"
            " (see [the HTTP API](../http-api.md#tenants-and-keys)) |",
            "| `AGENTQ_TOKEN_SECRET` | signs `agentq serve`'s short-lived tokens and session"
            " cookies; the same on every replica (unset: one kept in Redis)"
            " (see [Security](../security.md#keys-tokens-and-what-a-url-may-carry)) |",
            "| `AGENTQ_DEBUG` | `1`: the CLI shows the traceback of an unforeseen error |",
            "| `AGENTQ_TRACE_CONTENT_MAX_CHARS` | cap per recorded content attribute in"
            " spans (default 16000) |",
            "| `OTEL_*` | tracing, the OpenTelemetry SDK's standard variables"
            " (see [Tracing and logs](../operations/tracing.md)) |",
            "| `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT` | `true`: record"
            " messages and tool content in spans (off by default) |",
            "| `OPENAI_API_KEY`, `ANTHROPIC_API_KEY`, … | provider keys, read by the worker"
            " that calls the model (see [Models and providers](../models/index.md)) |",
            "",
        ]
    )


# --- CLI -----------------------------------------------------------------------------


def walk(command: click.Command, path: str) -> list[tuple[str, click.Command]]:
    """Every command below `command`, depth first, in the order `-h` lists them."""
    found = [(path, command)]
    if isinstance(command, click.Group):
        for name in command.list_commands(click.Context(command)):
            sub = command.get_command(click.Context(command), name)
            if sub is not None and not sub.hidden:
                found.extend(walk(sub, f"{path} {name}"))
    return found


def usage(command: click.Command, path: str) -> str:
    ctx = click.Context(command, info_name=path)
    return f"{path} {' '.join(command.collect_usage_pieces(ctx))}".strip()


def param_row(param: click.Parameter) -> str:
    if isinstance(param, click.Argument):
        names = f"`{param.make_metavar(click.Context(click.Command('x')))}`"
        return f"| {names} | argument{' (required)' if param.required else ''} | |"
    assert isinstance(param, click.Option)
    names = ", ".join(f"`{opt}`" for opt in [*param.opts, *param.secondary_opts])
    if not param.is_flag:
        names += f" `{param.metavar or param.type.name.upper()}`"
    default = param.default
    details = [param.help or ""]
    if param.multiple:
        details.append("Repeatable.")
    if isinstance(param.type, click.Choice):
        details.append("One of " + ", ".join(f"`{c}`" for c in param.type.choices) + ".")
    if param.required:
        details.append("Required.")
    shown_default = "" if param.is_flag or callable(default) else shown(default)
    return f"| {cell(names)} | {cell(' '.join(d for d in details if d))} | {shown_default} |"


def cli_page() -> str:
    lines = [
        "# CLI reference",
        "",
        "<!-- Generated at build time by docs/hooks/reference.py from the click commands:"
        " edit the code, not this page. -->",
        "",
        "Every command takes `-h`. Exit codes: `0` success, `1` the run failed or was"
        " cancelled, `2` bad input, `3` infrastructure, `4` timed out, `130` interrupted"
        " (see [the CLI guide](../cli.md)).",
        "",
    ]
    for path, command in walk(cli_main, "agentq"):
        depth = min(path.count(" ") + 1, 4)
        lines += [f"{'#' * (depth + 1)} `{path}`", ""]
        lines += ["```text", usage(command, path), "```", ""]
        help_text = inspect.cleandoc(command.help or "").replace("\b\n", "")
        lines += [help_text, ""]
        params = [p for p in command.params if not getattr(p, "hidden", False)]
        if params and not isinstance(command, click.Group):
            lines += ["| parameter | meaning | default |", "|---|---|---|"]
            lines += [param_row(p) for p in params]
            lines.append("")
    return "\n".join(lines)
