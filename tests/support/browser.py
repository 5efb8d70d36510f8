"""A real headless browser: Debian's chromium driven by Selenium through chromium-driver
(no browser download)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest

from tests.support.infra import missing


@pytest.fixture
def browser() -> Iterator[object]:
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
    chrome = webdriver.Chrome(service=Service(str(driver)), options=options)
    yield chrome
    chrome.quit()
