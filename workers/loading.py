"""Loading tool modules named on the command line (`--tools MODULE_OR_FILE`).

A module holds `@tool` functions, or plugins it registers when imported (a tool
kind, an executor, a model provider): one of the two, or it was named by mistake.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Sequence
from pathlib import Path

from agentq.orchestrator.errors import SpecError
from agentq.workers.function_tools import FunctionTool, tools_in


def registrations() -> tuple[int, ...]:
    """How many plugins are registered: a module that adds one is a plugin module."""
    from agentq.orchestrator.tool_kinds import tool_kinds
    from agentq.workers.executors.assemble import registered_executors
    from agentq.workers.providers import registered_providers

    return len(tool_kinds()), len(registered_executors()), len(registered_providers())


def load_tool_modules(names: Sequence[str]) -> list[FunctionTool]:
    found: list[FunctionTool] = []
    for name in names:
        before = registrations()
        if name.endswith(".py") or "/" in name:
            path = Path(name)
            if not path.is_file():
                raise SpecError(f"--tools: no file {name!r}")
            spec = importlib.util.spec_from_file_location(path.stem, path)
            assert spec is not None
            assert spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            sys.modules[path.stem] = module
            spec.loader.exec_module(module)
        else:
            try:
                module = importlib.import_module(name)
            except ImportError as exc:
                raise SpecError(f"--tools: cannot import {name!r}: {exc}") from None
        tools = tools_in(module)
        if not tools and registrations() == before:
            raise SpecError(f"--tools: {name!r} defines no @tool functions and registers no plugin")
        found.extend(tools)
    return found
