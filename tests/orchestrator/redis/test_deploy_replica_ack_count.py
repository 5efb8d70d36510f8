"""How many replicas a transition waits for: the setting, else what the primary's ROLE
last said (kept fresh by a ROLE riding along every few seconds), and a short count is a
retryable error."""

from __future__ import annotations

from typing import Any

import pytest

from agentq.orchestrator.core import keys
from agentq.orchestrator.core.errors import InfrastructureError
from agentq.orchestrator.redis.acks import ROLE_REFRESH_S, ReplicaAcks

pytestmark = pytest.mark.unit

WITH_REPLICA = [b"master", 100, [[b"127.0.0.1", b"6380", b"100"]]]
ALONE = [b"master", 100, []]


class Pipe:
    def __init__(self) -> None:
        self.sent: list[tuple[Any, ...]] = []

    def execute_command(self, *args: Any) -> None:
        self.sent.append(args)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_automatic_follows_the_primarys_replicas() -> None:
    clock = Clock()
    acks = ReplicaAcks(None, 0.5, clock=clock)
    assert acks.needs_role()
    acks.saw_role(WITH_REPLICA)
    assert (acks.wanted(), acks.needs_role(), acks.stale()) == (1, False, False)
    pipe = Pipe()
    assert acks.add(pipe, "aq:run:x") == (1, False)
    assert pipe.sent == [("WAIT", 1, 500)]

    clock.now += ROLE_REFRESH_S
    pipe = Pipe()
    assert acks.add(pipe, "aq:run:x") == (1, True)  # a ROLE rides along after the WAIT
    assert pipe.sent == [("WAIT", 1, 500), ("ROLE",)]
    acks.check(1, True, ["OK", 1, ALONE])  # the replica is gone: the next ones wait for none
    assert acks.wanted() == 0
    assert acks.add(Pipe(), "aq:run:x") == (0, False)


def test_a_replica_of_a_replica_counts_none() -> None:
    acks = ReplicaAcks(None, 1.0)
    acks.saw_role([b"slave", b"127.0.0.1", 6379, b"connected", 10])
    assert acks.wanted() == 0


def test_a_set_count_is_kept_whatever_the_primary_says() -> None:
    acks = ReplicaAcks(2, 1.0)
    assert not acks.needs_role()
    assert not acks.stale()
    acks.saw_role(ALONE)
    assert acks.wanted() == 2


def test_too_few_acknowledgements_are_a_retryable_error() -> None:
    acks = ReplicaAcks(1, 0.25)
    acks.check(1, False, ["OK", 1])
    with pytest.raises(InfrastructureError, match="0 of 1 replica") as caught:
        acks.check(1, False, ["OK", 0])
    assert caught.value.retryable


def test_after_a_short_wait_the_next_one_follows_a_write_of_its_own() -> None:
    """A WAIT counts its own connection's writes: a retried transition that writes nothing
    (it was applied already) must not pass for acknowledged on another connection."""
    acks = ReplicaAcks(1, 0.25)
    with pytest.raises(InfrastructureError):
        acks.check(1, False, ["OK", 0])
    pipe = Pipe()
    acks.add(pipe, "aq:run:x")
    assert pipe.sent == [("INCR", keys.REPLICA_ACK_PROBE), ("WAIT", 1, 250)]
    acks.check(1, False, ["OK", 5, 1])
    pipe = Pipe()
    acks.add(pipe, "aq:run:x")
    assert pipe.sent == [("WAIT", 1, 250)]
