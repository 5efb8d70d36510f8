"""The run state's layout epoch: which way this release reads and writes runs in Redis.

Transitions are Lua scripts that ship with each release; a worker of one layout beside
a worker of another would misread or miswrite the other's runs (Lua does not roll back
a transition that fails half way). Each worker's record carries its layout, and a worker
refuses to join a live fleet of another one (`orchestrator/fleet/layout_guard.py`).

Raise `STATE_LAYOUT` by one in the release that makes any change a worker of the
previous value would misread or miswrite: a key renamed or split, a field's meaning or
encoding changed, a counter moved, a script that expects state an earlier script does
not keep. A change only the new code reads (a new optional field, a new key nobody
older looks at) needs no raise. Say in the list below what each value changed.

0  every release before workers recorded their layout (a record without the field)
1  an event's number is the stream id Redis generates (`XADD key 0-*`); earlier workers
   counted with `HINCRBY meta seq` and wrote `XADD key 0-<seq>`
"""

from __future__ import annotations

import os
from collections.abc import Mapping

STATE_LAYOUT = 1
# What a worker record without a layout says: the releases before the field existed.
EARLIER_LAYOUT = 0

# Only the test suite sets it: a real worker process that believes it is of another
# layout (AGENTQ_TEST_* variables are not warned about as unknown settings).
TEST_OVERRIDE = "AGENTQ_TEST_STATE_LAYOUT"


def this_layout(environ: Mapping[str, str] = os.environ) -> int:
    """This process's layout: `STATE_LAYOUT`, unless a test overrides it."""
    override = environ.get(TEST_OVERRIDE)
    return STATE_LAYOUT if override is None else int(override)


def describe(layout: int) -> str:
    """A layout as an operator reads it in an error."""
    if layout == EARLIER_LAYOUT:
        return f"{layout} (a release from before layouts were recorded)"
    return str(layout)
