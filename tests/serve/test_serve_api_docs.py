"""`/docs` offline: Swagger UI's files come from the wheel, so a browser that reaches
nothing beyond loopback still renders the operations, and asks nothing of anyone else."""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest

from tests.support.browser import offline_browser, requested_urls
from tests.support.serve import ServeProcess

__all__ = ["offline_browser"]

pytestmark = pytest.mark.integration


@pytest.fixture
def serve(redis_url: str) -> Iterator[ServeProcess]:
    process = ServeProcess(redis_url)
    yield process
    process.stop()


def test_docs_render_the_operations_with_no_network_beyond_loopback(
    serve: ServeProcess, offline_browser: object
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.remote.webdriver import WebDriver
    from selenium.webdriver.support import expected_conditions as when
    from selenium.webdriver.support.ui import WebDriverWait

    assert isinstance(offline_browser, WebDriver)
    offline_browser.get(f"{serve.url}/docs")
    retry = (By.CSS_SELECTOR, '.opblock-summary-path[data-path="/v1/batches/{batch_id}/retry"]')
    WebDriverWait(offline_browser, 60).until(when.visibility_of_element_located(retry))
    assert offline_browser.find_element(By.CSS_SELECTOR, ".info .title").text.startswith("agentq")

    urls = requested_urls(offline_browser)
    assert f"{serve.url}/openapi.json" in urls
    assert any("/static/swagger-ui/swagger-ui-bundle.js" in url for url in urls)
    away = [
        u
        for u in urls
        if urlsplit(u).scheme not in {"data", "blob"}
        and urlsplit(u).hostname not in {"127.0.0.1", "localhost"}
    ]
    assert away == []
