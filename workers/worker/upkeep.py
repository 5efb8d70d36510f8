"""The fleet's upkeep turn: one worker process at a time passes the reaper.

Every process of a fleet used to pass the reaper's gate four times a second, and the gate
let one of them look at the workers per period: the passes grew with the fleet, the
looks did not. Now the turn (a short lease, `keys.UPKEEP_TURN`) picks the process that
passes; the others skip the pass. Taking and keeping the turn rides in each process's
lease renewals (no round trip of its own), and so does what the gate needs from every
process: a stamp that Redis was reachable (the gate's gap), without a look.

Crash safety keeps its bound: the turn lasts half a lease unrenewed, so when its holder
dies another process has taken it (at its next renewal, at most a third of a lease later
while that process holds no job: `LeaseRenewer.idle_interval_s`) and passes by the time
the dead holder's own lease lapses or a pass after; the others' stamps meanwhile keep the
hand-over from reading as a gap (which would hold the reaping back for a lease). A dead
worker's jobs still run again within a lease and a pass of its death.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from agentq.orchestrator.core import keys
from agentq.orchestrator.machine import scripts
from agentq.workers.queue.liveness import REAP_GATE, REAPER, Cadence

TURN = scripts.script("agentq.workers.worker", "upkeep_turn")
# A gate stamp's look period: never (the turn's holder looks).
_NEVER_LOOK_MS = 10**15


class UpkeepTurn:
    """Whether this process holds the turn, as its last renewal heard (a `Rider`).

    `on_taken` runs (on the renewer's thread) when a renewal takes the turn while this
    process did not hold it: the reaper waits for it instead of waking at every pass."""

    def __init__(
        self,
        worker_id: str,
        lease_s: float,
        cadence: Cadence,
        on_taken: Callable[[], object] = lambda: None,
    ) -> None:
        self.worker_id = worker_id
        self.on_taken = on_taken
        self.turn_ms = max(1, int(lease_s * 1000 / 2))
        self._gate_args = [cadence.gap_ms, cadence.steady_ms, _NEVER_LOOK_MS]
        self._sent = 0.0  # monotonic: when the last renewal was sent
        self._until = 0.0  # monotonic: the turn is ours until then

    def scripts(self) -> Sequence[tuple[str, Sequence[str], Sequence[Any]]]:
        self._sent = time.monotonic()
        return [
            (REAP_GATE, [REAPER], self._gate_args),
            (TURN, [keys.UPKEEP_TURN], [self.worker_id, self.turn_ms]),
        ]

    def answered(self, replies: Sequence[Any]) -> None:
        # Not held now: whoever read `held` since may be waiting for the turn.
        lapsed = time.monotonic() >= self._until
        self._until = self._sent + self.turn_ms / 1000 if replies[1] == 1 else 0.0
        if lapsed and self._until:
            self.on_taken()

    def held(self) -> bool:
        return time.monotonic() < self._until
