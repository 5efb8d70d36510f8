from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    """The HTTP client a provider under test talks to its local fake with."""
    async with httpx.AsyncClient() as client:
        yield client
