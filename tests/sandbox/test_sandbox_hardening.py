"""The hardening every container gets, read from the options we pass Docker."""

from __future__ import annotations

import asyncio

import pytest

from agentq.sandbox.backend import ContainerSpec
from agentq.sandbox.capacity import Capacity
from agentq.sandbox.container import SANDBOX_ENV, driver_command
from agentq.sandbox.docker_backend import container_options
from agentq.sandbox.images import parse_deb822_mirror, parse_one_line_mirror
from agentq.sandbox.models import Limits
from tests.support.waiting import eventually_async

pytestmark = pytest.mark.unit


def spec(**overrides: object) -> ContainerSpec:
    values: dict[str, object] = {
        "image": "img:1",
        "command": ["python3"],
        "labels": {"agentq.sandbox": "1"},
        "limits": Limits(memory_mb=128, cpus=0.5, pids=64, workdir_mb=32, open_files=100),
        "user": "10001:10001",
        "env": SANDBOX_ENV,
    }
    values.update(overrides)
    return ContainerSpec(**values)  # type: ignore[arg-type]


def test_containers_are_hardened_by_default() -> None:
    create, host = container_options(spec())
    assert create["user"] == "10001:10001"
    assert create["environment"] == dict(SANDBOX_ENV)
    assert host["network_mode"] == "none"
    assert host["dns"] == ["127.0.0.1"]
    assert host["read_only"] is True
    assert host["cap_drop"] == ["ALL"]
    assert host["security_opt"] == ["no-new-privileges"]  # and no seccomp=unconfined
    assert host["pids_limit"] == 64
    assert host["mem_limit"] == host["memswap_limit"] == "128m"
    assert host["nano_cpus"] == 500_000_000
    assert host["init"] is True
    assert host["privileged"] is False
    assert "size=32m" in host["tmpfs"]["/work"]
    assert "noexec" in host["tmpfs"]["/tmp"]
    ulimits = {u["Name"]: (u["Soft"], u["Hard"]) for u in host["ulimits"]}
    assert ulimits["core"] == (0, 0)
    assert ulimits["nofile"] == (100, 100)
    assert ulimits["fsize"] == (32 * 1024 * 1024, 32 * 1024 * 1024)
    assert host["log_config"]["Type"] == "none"
    assert "binds" not in host
    assert "volumes" not in host
    assert "devices" not in host


def test_network_only_when_asked() -> None:
    _, host = container_options(spec(network=True, network_name="sandbox-net"))
    assert host["network_mode"] == "sandbox-net"
    assert "dns" not in host


def test_environment_has_no_secrets() -> None:
    assert set(SANDBOX_ENV) == {"PATH", "HOME", "LANG", "PYTHONDONTWRITEBYTECODE"}


def test_driver_commands_carry_their_source() -> None:
    python = driver_command("python")
    assert python[:4] == ["python3", "-I", "-u", "-c"]
    assert "def run_call" in python[4]
    node = driver_command("javascript")
    assert node[:2] == ["node", "-e"]
    assert "function runCall" in node[2]
    # Linux limits one argument to 128 KiB.
    assert max(len(python[4]), len(node[2])) < 128 * 1024


def test_mirror_from_deb822_sources() -> None:
    text = (
        "Types: deb\nURIs: http://mirror.example/debian\nSuites: bookworm bookworm-updates\n"
        "Components: main\n\n"
        "Types: deb\nURIs: http://mirror.example/debian-security\nSuites: bookworm-security\n"
    )
    assert parse_deb822_mirror(text) == "http://mirror.example/debian"
    assert parse_deb822_mirror("Types: deb\nURIs: http://x\nSuites: bullseye\n") is None


def test_mirror_from_one_line_sources() -> None:
    text = "# comment\ndeb [arch=amd64] http://mirror.example/debian bookworm main\n"
    assert parse_one_line_mirror(text) == "http://mirror.example/debian"
    assert parse_one_line_mirror("deb http://x bookworm-security main\n") is None


async def test_capacity_hands_slots_to_waiters_in_order() -> None:
    capacity = Capacity(1)
    assert capacity.try_acquire()
    first = asyncio.create_task(capacity.acquire(5))
    second = asyncio.create_task(capacity.acquire(5))
    await eventually_async(lambda: capacity.waiting == 2, "both to wait")
    assert not capacity.try_acquire()  # waiters come before background refills
    capacity.release()
    assert await first
    assert not second.done()
    capacity.release()
    assert await second
    capacity.release()
    assert capacity.used == 0


async def test_capacity_times_out() -> None:
    capacity = Capacity(1)
    assert capacity.try_acquire()
    assert not await capacity.acquire(0.01)
    assert capacity.waiting == 0
    capacity.release()
    assert capacity.try_acquire()


@pytest.mark.parametrize("limit", [1, 3])
async def test_capacity_never_exceeds_its_limit(limit: int) -> None:
    capacity = Capacity(limit)
    held = 0
    peak = 0

    async def worker() -> None:
        nonlocal held, peak
        assert await capacity.acquire(5)
        held += 1
        peak = max(peak, held)
        await asyncio.sleep(0.001)
        held -= 1
        capacity.release()

    await asyncio.gather(*(worker() for _ in range(20)))
    assert peak <= limit
    assert capacity.used == 0
