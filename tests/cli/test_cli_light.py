"""`agentq -h` stays light: the CLI's modules import click and the standard library at
their top and everything else inside the commands (checked by what a fresh interpreter
has loaded, never by a timing). Two option defaults are written out for that reason;
they must stay equal to the constants they stand for."""

from __future__ import annotations

import ast
import json
import subprocess
import sys

import pytest

from agentq.cli.batch import submit as batch_submit
from agentq.cli.main import catalog_publish
from agentq.orchestrator.batches.state import DEFAULT_BATCH_CONCURRENCY
from agentq.orchestrator.core.envelopes import TOOLS_QUEUE
from tests.support.infra import REPO

pytestmark = pytest.mark.unit

HEAVY = ("pydantic", "redis", "rich", "httpx", "fakeredis", "agentq.orchestrator.client")


def test_help_loads_nothing_heavy() -> None:
    probe = (
        "import json, sys\n"
        "from agentq.cli.main import main\n"
        "try:\n"
        "    main(['-h'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(json.dumps(sorted(sys.modules)), file=sys.stderr)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    loaded = json.loads(done.stderr.strip().splitlines()[-1])
    assert "Commands:" in done.stdout
    heavy = sorted(m for m in loaded if any(m == h or m.startswith(h + ".") for h in HEAVY))
    assert heavy == []


def _default(command: object, name: str) -> object:
    return next(p.default for p in command.params if p.name == name)  # type: ignore[attr-defined]


def test_written_out_defaults_match_their_constants() -> None:
    assert _default(catalog_publish, "tool_queue") == TOOLS_QUEUE
    assert _default(batch_submit, "concurrency") == DEFAULT_BATCH_CONCURRENCY


def _runtime_uses_of_type_only_names(source: str) -> list[tuple[int, str]]:
    """Names a module imports only for type checking but reads at run time (mypy cannot
    see it: TYPE_CHECKING is true for it), outside the functions that import them."""
    tree = ast.parse(source)
    type_only = {
        alias.asname or alias.name
        for node in tree.body
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING"
        for sub in ast.walk(node)
        if isinstance(sub, ast.ImportFrom)
        for alias in sub.names
    }
    annotations = {
        id(part)
        for node in ast.walk(tree)
        for field in ("annotation", "returns")
        if (value := getattr(node, field, None)) is not None
        for part in ast.walk(value)
    }
    found: list[tuple[int, str]] = []

    def visit(node: ast.AST, imported: frozenset[str]) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            imported = imported | {
                alias.asname or alias.name.split(".")[0]
                for sub in ast.walk(node)
                if isinstance(sub, ast.Import | ast.ImportFrom)
                for alias in sub.names
            }
        if (
            isinstance(node, ast.Name)
            and node.id in type_only
            and node.id not in imported
            and id(node) not in annotations
        ):
            found.append((node.lineno, node.id))
        for child in ast.iter_child_nodes(node):
            if not (isinstance(child, ast.If) and child in tree.body):
                visit(child, imported)

    for node in tree.body:
        if not (isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING"):
            visit(node, frozenset())
    return found


def test_no_type_only_import_is_read_at_run_time() -> None:
    misused = {
        path.name: uses
        for path in sorted((REPO / "agentq" / "cli").glob("*.py"))
        if (uses := _runtime_uses_of_type_only_names(path.read_text()))
    }
    assert misused == {}


def test_a_commands_timeout_starts_after_the_client_is_loaded() -> None:
    # `--timeout` bounds the wait on Redis: loading the client's modules (seconds on a
    # loaded machine) happens before the clock starts, not inside the command's budget.
    probe = (
        "import sys\n"
        "from agentq.cli.errors import guarded\n"
        "async def command():\n"
        "    return 'agentq.orchestrator.client' in sys.modules\n"
        "print(guarded(command, 60)())\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.strip() == "True"
