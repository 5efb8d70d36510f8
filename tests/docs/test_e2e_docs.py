"""The guide builds: `mkdocs build --strict` over docs/ and mkdocs.yml, as CI runs it.

Strict mode fails on a broken link or anchor, a page missing from the nav, and a setting
the reference hook cannot describe. The generated reference pages are checked against
the live objects too: every setting's variable and every command is on them. (The pages'
blocks are run by test_e2e_readme.py.)"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import click
import pytest

from agentq.cli.main import main as cli_main
from agentq.orchestrator.core.settings import Settings
from tests.support.infra import REPO, missing

pytestmark = pytest.mark.e2e

HOOK = REPO / "docs" / "hooks" / "reference.py"


def mkdocs_available() -> None:
    if importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("material") is None:
        missing("mkdocs and mkdocs-material", "pip install -e '.[docs]' (.ci/install does)")


def load_hook() -> ModuleType:
    mkdocs_available()
    spec = importlib.util.spec_from_file_location("agentq_docs_reference_hook", HOOK)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_docs_build_strict(tmp_path: Path) -> None:
    mkdocs_available()
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1", "PYTHONPATH": str(REPO)},
    )
    assert done.returncode == 0, done.stderr[-5000:]
    for page in ("index.html", "reference/configuration/index.html", "reference/cli/index.html"):
        assert (tmp_path / page).is_file(), page


def test_the_configuration_page_lists_every_setting() -> None:
    page: str = load_hook().configuration_page()
    prefix = Settings.model_config.get("env_prefix", "")
    absent = [n for n in Settings.model_fields if f"`{prefix}{n.upper()}`" not in page]
    assert not absent, absent


def test_the_cli_page_lists_every_command() -> None:
    page: str = load_hook().cli_page()

    def paths(command: click.Command, path: str) -> list[str]:
        found = [path]
        if isinstance(command, click.Group):
            for name, sub in command.commands.items():
                if not sub.hidden:
                    found += paths(sub, f"{path} {name}")
        return found

    absent = [p for p in paths(cli_main, "agentq") if f"`{p}`" not in page]
    assert not absent, absent


@pytest.mark.parametrize("page", ["configuration", "cli"])
def test_the_reference_pages_are_not_files(page: str) -> None:
    """Generated only: a stale copy in docs/ would shadow the live page."""
    assert not (REPO / "docs" / "reference" / f"{page}.md").exists()
