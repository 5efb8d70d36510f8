"""Loading tool modules named on the command line (`--tools MODULE_OR_FILE`)."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Sequence
from pathlib import Path

from agentq.orchestrator.errors import SpecError
from agentq.workers.function_tools import FunctionTool, tools_in


def load_tool_modules(names: Sequence[str]) -> list[FunctionTool]:
    found: list[FunctionTool] = []
    for name in names:
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
        if not tools:
            raise SpecError(f"--tools: {name!r} defines no @tool functions")
        found.extend(tools)
    return found
