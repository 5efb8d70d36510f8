"""A real headless browser: Debian's chromium driven by Selenium through chromium-driver
(no browser download)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.infra import free_port, missing


def chromium(*flags: str, capabilities: dict[str, Any] | None = None) -> Any:
    """A started headless chromium (a Selenium WebDriver) with `flags` added."""
    chromium, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if chromium is None or driver is None:
        missing("chromium and chromium-driver", "apt-get install -y chromium chromium-driver")
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        missing("selenium", "pip install selenium (in the test extras)")
    options = webdriver.ChromeOptions()
    options.binary_location = str(chromium)
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"):
        options.add_argument(flag)
    options.add_argument("--window-size=1280,1000")
    for flag in flags:
        options.add_argument(flag)
    for name, value in (capabilities or {}).items():
        options.set_capability(name, value)
    return webdriver.Chrome(service=Service(str(driver)), options=options)


@pytest.fixture
def browser() -> Iterator[object]:
    chrome = chromium()
    yield chrome
    chrome.quit()


@pytest.fixture
def offline_browser() -> Iterator[object]:
    """A chromium that reaches loopback only: every other request goes through a proxy
    on a loopback port nothing listens on (chromium never proxies loopback), and fails.
    `requested_urls(driver)` lists what its pages asked for."""
    chrome = chromium(
        f"--proxy-server=http://127.0.0.1:{free_port()}",
        capabilities={"goog:loggingPrefs": {"performance": "ALL"}},
    )
    yield chrome
    chrome.quit()


def requested_urls(driver: Any) -> list[str]:
    """Every URL the browser sent a request for since the last call (DevTools' network
    events, from the performance log the offline browser keeps)."""
    urls = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Network.requestWillBeSent":
            urls.append(str(message["params"]["request"]["url"]))
    return urls


def shown_text(driver: Any, css: str) -> str | None:
    """The text the first element matching `css` shows, or None when there is none, read
    in one script. A page that redraws itself replaces its elements between a
    `find_element` and a read of `.text` (the found element is then stale); a script runs
    between two of the page's own tasks, so it sees one whole drawing."""
    text = driver.execute_script(
        "const element = document.querySelector(arguments[0]);"
        " return element === null ? null : element.innerText.trim();",
        css,
    )
    return None if text is None else str(text)
