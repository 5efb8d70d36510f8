"""Keep the garbage collector off what a worker loaded at startup.

A worker's startup leaves some hundred thousand long-lived objects (its modules,
the OpenTelemetry SDK and exporter when tracing, pydantic's schemas, the tool
registry); every full collection walks them all again, ~0.3 ms a step on a
busy worker, to find none of them garbage. `gc.freeze()` moves them to the
permanent generation, which no collection walks: what the jobs allocate is
still collected as before. Collected first, so that no startup garbage is
frozen with them; once per process (an embedded session started twice does
not pay the collection twice). Only a worker process (`agentq worker`) freezes: an
embedded session shares its host application's heap, which is not ours to freeze.
"""

from __future__ import annotations

import gc

_frozen = False


def freeze_startup_objects() -> None:
    """Collect once, then freeze what survived (see the module's docstring)."""
    global _frozen
    if _frozen:
        return
    _frozen = True
    gc.collect()
    gc.freeze()
