"""A machine's scripts are built when first asked for, and a store registers each on its
Redis when it first sends it (no Redis needed): building every script of every machine
at import was a few tenths of a second of each process's start-up (every `agentq`
command and worker), and a process sends a few of them."""

from __future__ import annotations

import pytest
from redis.asyncio import Redis

from agentq.orchestrator.machine import scripts
from agentq.orchestrator.runs.store import RunStore, load_scripts

pytestmark = pytest.mark.unit


def test_a_script_is_built_once_on_first_use_and_only_it() -> None:
    built: list[str] = []

    def build(name: str) -> str:
        built.append(name)
        return f"-- {name}"

    loaded = scripts.Scripts(["b", "a", "b"], build)
    assert list(loaded) == ["a", "b"]
    assert len(loaded) == 2
    assert "a" in loaded
    assert built == []
    assert loaded["b"] == "-- b"
    assert loaded["b"] == "-- b"
    assert built == ["b"]
    with pytest.raises(KeyError):
        loaded["c"]
    assert built == ["b"]


def test_the_lazy_sources_are_the_eager_ones() -> None:
    """The same text whether asked for one at a time or all at once (`dict`)."""
    lazy, eager = load_scripts(), dict(load_scripts())
    assert len(eager) > 10
    assert all(eager.values())
    assert {name: lazy[name] for name in reversed(list(lazy))} == eager


async def test_a_store_registers_a_script_when_it_first_sends_it() -> None:
    redis = Redis()  # never connected: registering a script sends nothing
    store = RunStore(redis)
    registered = store._scripts
    assert dict(registered) == {}
    name = next(iter(load_scripts()))
    script = registered[name]
    assert registered[name] is script
    assert script.script == load_scripts()[name]
    assert list(registered) == [name]
    with pytest.raises(KeyError):
        registered["no-such-script"]
    await redis.aclose()
