"""Fixtures for the sandbox integration tests: a real Docker engine, real images.

Without a reachable Docker engine these tests skip locally, saying how to
enable them, and FAIL when CI=true: in CI they must run for real.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import docker
import pytest

from agentq.sandbox.config import LABEL_SANDBOX, LABEL_WORKER, SandboxConfig
from agentq.sandbox.docker_backend import DockerBackend
from agentq.sandbox.images import build_images
from agentq.sandbox.manager import SandboxManager

MakeManager = Callable[..., Awaitable[SandboxManager]]

_HOW_TO_ENABLE = (
    "start dockerd (e.g. `dockerd --iptables=false --bridge=none &`, or run "
    "`.ci/sandbox-setup`) and build the images with `python -m agentq.sandbox.images`"
)


@pytest.fixture(scope="session")
def sandbox_images() -> list[str]:
    try:
        docker.from_env().ping()
    except Exception as exc:
        message = f"Docker is not reachable ({exc}); {_HOW_TO_ENABLE}"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    # Skips the ~45 s build when the images exist already.
    return build_images()


@pytest.fixture
async def make_manager(sandbox_images: list[str]) -> AsyncIterator[MakeManager]:
    """Started managers with unique worker ids; each is closed and checked empty."""
    managers: list[SandboxManager] = []

    async def make(**overrides: Any) -> SandboxManager:
        settings: dict[str, Any] = {
            "worker_id": f"test-{uuid.uuid4().hex[:12]}",
            "pool_size": {},
            "max_containers": 6,
        }
        liveness = overrides.pop("liveness", None)
        settings.update(overrides)
        manager = SandboxManager(DockerBackend(), SandboxConfig(**settings), liveness=liveness)
        managers.append(manager)
        await manager.start()
        return manager

    yield make
    for manager in managers:
        await manager.aclose()
        left = await manager.backend.list(
            {LABEL_SANDBOX: "1", LABEL_WORKER: manager.config.worker_id}
        )
        assert left == [], f"containers left behind: {left}"


@pytest.fixture
async def manager(make_manager: MakeManager) -> SandboxManager:
    return await make_manager()
