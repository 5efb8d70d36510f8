"""Tests are laid out by package, mirroring the code; the tier is a marker. Every test
module names its tier, so `-m unit` (or `-m "not faults"`) selects what it says."""

from __future__ import annotations

import ast

import pytest

from tests.support.infra import REPO

pytestmark = pytest.mark.unit

TIERS = {"unit", "component", "integration", "e2e", "faults", "benches"}
PRODUCT = ("orchestrator", "workers", "sandbox", "cli", "serve")


def _marks(path_text: str) -> set[str]:
    for node in ast.parse(path_text).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets
        ):
            return {n.attr for n in ast.walk(node.value) if isinstance(n, ast.Attribute)}
    return set()


def test_every_test_module_names_its_tier() -> None:
    missing = [
        str(path.relative_to(REPO))
        for path in sorted((REPO / "tests").rglob("test_*.py"))
        if not _marks(path.read_text()) & TIERS
    ]
    assert missing == []


def test_no_folder_is_named_after_a_tier() -> None:
    folders = {p.name for p in (REPO / "tests").iterdir() if p.is_dir()}
    assert folders & TIERS == set()
