"""The base of every part of a run spec."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class SpecModel(BaseModel):
    """A part of a run spec: unknown fields are errors, not silently dropped."""

    model_config = ConfigDict(extra="forbid")
