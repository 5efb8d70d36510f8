"""The layering of DESIGN.md, enforced on every import statement of the product.

- orchestrator never imports workers or sandbox;
- sandbox imports nothing of agentq but itself;
- providers never import the run store (a wire format knows nothing of runs);
- nothing, product or test, imports the folders by their bare top-level names: the
  installed wheel only has `agentq.*`, and a bare import would load a module twice.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.infra import REPO

pytestmark = pytest.mark.unit

ROOT = REPO
PRODUCT = ("agentq", "orchestrator", "workers", "sandbox")


def _python_files(*folders: str) -> Iterator[Path]:
    for folder in folders:
        for path in (ROOT / folder).rglob("*.py"):
            if "node_modules" not in path.parts:
                yield path


def _imports(path: Path) -> Iterator[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module


def _violations(folder: str, forbidden: tuple[str, ...]) -> list[str]:
    found = []
    for path in _python_files(folder):
        for name in _imports(path):
            if any(name == f or name.startswith(f + ".") for f in forbidden):
                found.append(f"{path.relative_to(ROOT)} imports {name}")
    return found


@pytest.mark.parametrize(
    ("folder", "forbidden"),
    [
        ("orchestrator", ("agentq.workers", "agentq.sandbox", "agentq.cli", "agentq.serve")),
        ("sandbox", ("agentq.orchestrator", "agentq.workers", "agentq.cli", "agentq.serve")),
        ("workers/models", ("agentq.orchestrator.runs.store",)),
    ],
)
def test_layering(folder: str, forbidden: tuple[str, ...]) -> None:
    assert _violations(folder, forbidden) == []


def test_no_bare_top_level_imports() -> None:
    bare = ("orchestrator", "workers", "sandbox")
    found = []
    for path in _python_files(*PRODUCT, "tests", "bench", "examples"):
        for name in _imports(path):
            if name.split(".")[0] in bare:
                found.append(f"{path.relative_to(ROOT)} imports {name}")
    assert found == []
