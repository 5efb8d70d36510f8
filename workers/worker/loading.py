"""Loading tool modules named on the command line (`--tools MODULE_OR_FILE`).

A module name is imported with the current directory on the path first, as
Celery and arq users expect (`agentq worker --tools mytools` next to
`mytools.py`). A module that fails to import is reported in one line: its own
error and where it happened, never a traceback.

A module holds `@tool` functions, or plugins it registers when imported (a tool
kind, an executor, a model provider): one of the two, or it was named by mistake.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

from agentq.orchestrator.core.errors import SpecError
from agentq.workers.tools.function_tools import FunctionTool, tools_in


def _where(exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    # The innermost frame outside importlib's machinery is the user's line.
    mine = [f for f in frames if f.filename != __file__ and "importlib" not in f.filename]
    if isinstance(exc, SyntaxError) and exc.filename:
        return f" ({exc.filename}:{exc.lineno})"
    if not mine:
        return ""
    frame = mine[-1]
    return f" ({frame.filename}:{frame.lineno})"


def _failed(name: str, exc: BaseException) -> SpecError:
    message = exc.msg if isinstance(exc, SyntaxError) else str(exc)
    return SpecError(
        f"--tools {name!r} failed to import: {type(exc).__name__}: {message}{_where(exc)}"
    )


def _import_file(name: str) -> ModuleType:
    path = Path(name)
    if not path.is_file():
        raise SpecError(f"--tools: no file {name!r}")
    spec = importlib.util.spec_from_file_location(path.stem, path)
    if spec is None or spec.loader is None:
        raise SpecError(f"--tools: {name!r} is not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        sys.modules.pop(path.stem, None)
        raise _failed(name, exc) from None
    return module


def _import_name(name: str) -> ModuleType:
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.insert(0, cwd)
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and name.startswith(exc.name):
            raise SpecError(
                f"--tools: no module named {name!r} (looked in the current directory and "
                "the Python path; a file can be given as path/to/tools.py)"
            ) from None
        raise _failed(name, exc) from None
    except Exception as exc:
        raise _failed(name, exc) from None


def registrations() -> tuple[int, ...]:
    """How many plugins are registered: a module that adds one is a plugin module."""
    from agentq.orchestrator.tools import tool_kinds
    from agentq.workers.models import registered_providers
    from agentq.workers.steps.hooks import registered_hooks, registered_rule_hooks
    from agentq.workers.tools.assemble import registered_executors

    return (
        len(tool_kinds()),
        len(registered_executors()),
        len(registered_providers()),
        len(registered_hooks()),
        len(registered_rule_hooks()),
    )


def load_tool_modules(names: Sequence[str]) -> list[FunctionTool]:
    """The `@tool` functions of the modules `names`; a tool name defined by two of them
    is refused (one of the two would silently answer every call)."""
    found: dict[str, tuple[FunctionTool, str]] = {}
    for name in names:
        before = registrations()
        is_file = name.endswith(".py") or "/" in name
        module = _import_file(name) if is_file else _import_name(name)
        tools = tools_in(module)
        if not tools and registrations() == before:
            raise SpecError(f"--tools: {name!r} defines no @tool functions and registers no plugin")
        for tool in tools:
            seen, where = found.setdefault(tool.name, (tool, name))
            if seen is not tool:
                raise SpecError(
                    f"--tools: tool {tool.name!r} is defined in both {where!r} and {name!r}: "
                    "rename one (@tool(name=...)) or drop a module"
                )
    return [tool for tool, _ in found.values()]
