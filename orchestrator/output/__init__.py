"""Structured output for a run: the spec, the mode a step uses, validation and repair (pure)."""
