"""The dashboard is ES modules, one per page, loaded by the browser as they are: every
module the page imports is in the package as built (setuptools' build_py, what a wheel
holds), and every page loads in Debian's chromium with no script error."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.serve.test_serve_console import Page, ended, submit
from tests.serve.test_serve_console_batches import submit_batch
from tests.support.browser import chromium
from tests.support.infra import REPO
from tests.support.serve import ServeProcess
from tests.support.specs import scripted

pytestmark = pytest.mark.integration

IMPORT = re.compile(r'^import .* from "(\.[^"]+)";$', re.MULTILINE)


def imported(static: Path) -> set[Path]:
    """The modules index.html loads, and every module they import, transitively."""
    entry = re.search(
        r'<script type="module" src="/static/([^"]+)">', (static / "index.html").read_text()
    )
    assert entry, "index.html loads a module"
    seen: set[Path] = set()
    todo = [static / entry[1]]
    while todo:
        module = todo.pop()
        if module in seen:
            continue
        assert module.is_file(), f"{module.relative_to(static)} is imported but not in the package"
        seen.add(module)
        todo += [(module.parent / path).resolve() for path in IMPORT.findall(module.read_text())]
    return seen


def test_every_module_the_page_imports_is_in_the_built_package(tmp_path: Path) -> None:
    build = ["-q", "build_py", "--build-lib", str(tmp_path)]
    subprocess.run(
        [sys.executable, "-c", "from setuptools import setup; setup()", *build],
        cwd=REPO,
        check=True,
        capture_output=True,
    )
    static = (tmp_path / "agentq" / "serve" / "static").resolve()
    modules = imported(static)
    source = (REPO / "agentq" / "serve" / "static" / "js").resolve()
    assert {m.relative_to(static / "js") for m in modules} == {
        m.relative_to(source) for m in source.rglob("*.js")
    }


@pytest.fixture
def logging_browser() -> Iterator[object]:
    """A chromium that keeps its pages' console messages (`get_log("browser")`)."""
    chrome = chromium(capabilities={"goog:loggingPrefs": {"browser": "ALL"}})
    yield chrome
    chrome.quit()


def test_each_page_loads_with_no_script_error(
    server: ServeProcess, logging_browser: object
) -> None:
    page = Page(logging_browser, server.url)
    submit(server, scripted({"text": "hello"}, id="one"))
    assert ended(server, "one")["status"] == "succeeded"
    submit_batch(server, "b1", [{"custom_id": "x", "spec": scripted({"text": "ok"})}])
    pages = {
        "#/": ("#runs tbody", "one"),
        "#/runs/one": ("#steps", "hello"),
        "#/batches": ("#batches tbody", "b1"),
        "#/batches/b1": ("#batch-id", "b1"),
        "#/schedules": ("#schedules-empty", "No schedules yet."),
        "#/workers": ("#workers tbody", "model"),
        "#/keys": ("#keys-empty", "No key holds a slot or a held job."),
    }
    for fragment, (css, wanted) in pages.items():
        page.open(fragment)
        page.text(css, wanted)
        assert severe(page.driver) == [], fragment


def severe(driver: Any) -> list[dict[str, Any]]:
    """The page's console errors since the last call (chromium's browser log)."""
    return [entry for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]
