"""`@to_model_output`: functions that convert a tool's output into what the model sees.

A tool entry names one (`"to_model_output": "NAME"`), or a function tool brings its
own (`@tool(to_model_output=fn)`, registered under the tool's name). It is called with
the output (as JSON data) and answers text, text and media parts, or None
(orchestrator/core/model_output.py); the run records the output as it was. They are
hooks like the loop's (workers/steps/hooks.py lists them with the others, announces
them and calls them, here or as a `hook` job on a worker that registered them); they
are kept here because `@tool` registers them too, and the tools layer sits below the
steps layer.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, overload

_CONVERTERS: dict[str, Callable[..., Any]] = {}


def register_converter(name: str, fn: Callable[..., Any]) -> None:
    _CONVERTERS[name] = fn


@overload
def to_model_output(fn: Callable[..., Any], /) -> Callable[..., Any]: ...


@overload
def to_model_output(
    *, name: str | None = None
) -> Callable[[Callable[..., Any]], Callable[..., Any]]: ...


def to_model_output(
    fn: Callable[..., Any] | None = None, /, *, name: str | None = None
) -> Callable[..., Any]:
    """Register a converter: `@to_model_output` or `@to_model_output(name=...)`; the
    function is returned as it is (sync or async)."""

    def register(f: Callable[..., Any]) -> Callable[..., Any]:
        register_converter(name or f.__name__, f)
        return f

    return register(fn) if fn is not None else register


def registered_converters() -> dict[str, Callable[..., Any]]:
    return dict(_CONVERTERS)
