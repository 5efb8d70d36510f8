"""Concurrency keys on the dashboard, in a real headless browser over a real `agentq
serve`, worker and redis-server: the keys page lists the signed-in tenant's active keys
(runs holding a slot out of the max, jobs held), the run page shows a run's key and
whether it runs or waits for a slot; another tenant sees none of it, over HTTP either.
A screenshot of the keys page for the docs."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentq.serve.auth import hash_key
from tests.serve.test_serve_console import ARTIFACTS, Page
from tests.support.infra import WorkerProcess
from tests.support.serve import ServeProcess
from tests.support.specs import scripted

pytestmark = pytest.mark.integration

ACME, GLOBEX = "key-acme-secret", "key-globex-secret"


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


@pytest.fixture
def keyed(redis_url: str, worker: WorkerProcess) -> Iterator[ServeProcess]:
    keys = f"{hash_key(ACME)} acme\n{hash_key(GLOBEX)} globex"
    process = ServeProcess(redis_url, env={"AGENTQ_API_KEYS": keys})
    yield process
    process.stop()


def held_run(server: ServeProcess, tmp: Path, name: str) -> str:
    """A run of acme's key `user-1` (max 1) whose call holds until the gate opens."""
    spec = {
        **scripted(
            {
                "tool_calls": [
                    {
                        "name": "hold_until",
                        "input": {
                            "started": str(tmp / f"{name}.started"),
                            "gate": str(tmp / "gate"),
                        },
                    }
                ]
            },
            {"text": "released"},
            tools=["hold_until"],
            id=name,
        ),
        "concurrency": {"key": "user-1", "max": 1},
    }
    created = httpx.post(f"{server.url}/v1/runs", json=spec, headers=bearer(ACME), timeout=30)
    assert created.status_code == 201, created.text
    return str(created.json()["id"])


def sign_in(page: Page, key: str) -> None:
    from selenium.webdriver.common.by import By

    page.open("#/")
    field = page.find("#api-key")
    field.send_keys(key)
    page.driver.execute_script("arguments[0].dispatchEvent(new Event('change'))", field)
    page.until(
        lambda d: d.find_element(By.ID, "api-key").get_attribute("placeholder") == "signed in"
    )


def listed(server: ServeProcess, key: str) -> Any:
    got = httpx.get(f"{server.url}/v1/concurrency/keys", headers=bearer(key), timeout=30)
    assert got.status_code == 200, got.text
    return got.json()


def test_a_tenants_keys_and_a_runs_slot_on_the_dashboard(
    keyed: ServeProcess, browser: object, tmp_path: Path
) -> None:
    page = Page(browser, keyed.url)
    first = held_run(keyed, tmp_path, "first")
    try:
        page.until(lambda _: (tmp_path / "first.started").exists())
        # The first run's call runs and holds the key's one slot: the second run's model
        # step is held for it.
        second = held_run(keyed, tmp_path, "second")
        sign_in(page, ACME)
        page.open("#/keys")
        row = '#keys tr[data-key="user-1"]'
        page.text(f"{row} .in-use", "1 / 1")
        page.text(f"{row} .held", "1")
        assert listed(keyed, ACME) == {
            "keys": [{"key": "user-1", "in_use": 1, "max": 1, "held": 1}]
        }
        page.driver.set_window_size(1280, 420)
        ARTIFACTS.mkdir(exist_ok=True)
        shot = ARTIFACTS / "console-keys.png"
        assert page.driver.save_screenshot(str(shot))
        assert shot.stat().st_size > 5_000
        page.driver.set_window_size(1280, 1000)

        page.open(f"#/runs/{second}")
        page.text("#run-concurrency", "waiting for a slot")
        page.text("#run-concurrency .conc-key", "user-1")
        page.open(f"#/runs/{first}")
        page.text("#run-concurrency", "running: holds a slot")
        page.text("#run-concurrency", "1 / 1 in use · 1 held")

        # Another tenant: no keys, and acme's runs are not there to ask about.
        assert listed(keyed, GLOBEX) == {"keys": []}
        other = httpx.get(f"{keyed.url}/v1/runs/{first}", headers=bearer(GLOBEX), timeout=30)
        assert other.status_code == 404, other.text
        sign_in(page, GLOBEX)
        page.open("#/keys")
        page.text("#keys-empty", "No key holds a slot or a held job.")
        assert page.driver.find_elements("css selector", "#keys tbody tr") == []
    finally:
        (tmp_path / "gate").touch()

    # Both runs end: the key holds nothing and is listed no more.
    for run_id in (first, second):
        done = httpx.get(
            f"{keyed.url}/v1/runs/{run_id}", params={"wait": 30}, headers=bearer(ACME), timeout=60
        ).json()
        assert done["status"] == "succeeded", done
        assert done["concurrency"] == {
            "key": "user-1",
            "max": 1,
            "in_use": None,
            "held": None,
            "state": None,
        }
    assert listed(keyed, ACME) == {"keys": []}
