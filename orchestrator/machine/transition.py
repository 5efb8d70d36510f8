"""The base of every machine's transition inputs (runs, calls, batches).

A transition's input is one typed model, sent as JSON to one Lua script (the
Store base's `_send`): the script it runs and the time it happens at, which the
scripts read as their clock (`A.at`). Each machine adds whose record it changes.
"""

from __future__ import annotations

import time
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field


class Transition(BaseModel):
    """One transition's input: nothing the script does not read is accepted."""

    model_config = ConfigDict(extra="forbid")
    script: ClassVar[str]  # the Lua file it runs, without `.lua`

    at: float = Field(default_factory=time.time)
