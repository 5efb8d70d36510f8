"""`@tool`: turn a Python function into a tool a worker serves.

The name comes from the function, the description from its docstring, the
JSON schema from its type hints (pydantic models allowed). A sync function
runs in a thread; an async generator's yielded values are progress updates,
each shown as it is yielded, and its last one is also the result. A parameter
annotated `ToolContext` receives the call's context and is not in the schema.
`to_model_output=fn` converts each output into what the model sees (the run records
the output as it was).
"""

from __future__ import annotations

import inspect
import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, get_type_hints, overload

from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from agentq.orchestrator.core.errors import ToolInputError
from agentq.workers.tools.context import ToolContext
from agentq.workers.tools.model_output import register_converter

FunctionKind = Literal["sync", "async", "asyncgen"]


@dataclass(frozen=True)
class FunctionTool:
    name: str
    description: str
    input_schema: dict[str, Any]
    fn: Callable[..., Any]
    kind: FunctionKind
    arguments: type[BaseModel]
    # The parameter the call's ToolContext is passed as (None: the function takes none).
    context_param: str | None = None
    # The to_model_output hook converting its outputs for the model (None: shown as is).
    to_model_output: str | None = None

    def bind(self, value: Any) -> dict[str, Any]:
        """Validate and coerce the model's input into keyword arguments."""
        try:
            parsed = self.arguments.model_validate(value)
        except ValidationError as exc:
            details = "; ".join(
                f"{'/'.join(str(p) for p in e['loc']) or '(input)'}: {e['msg']}"
                for e in exc.errors()[:5]
            )
            raise ToolInputError(f"Invalid input for tool {self.name!r}: {details}") from None
        return {name: getattr(parsed, name) for name in self.arguments.model_fields}


def _kind(fn: Callable[..., Any]) -> FunctionKind:
    if inspect.isasyncgenfunction(fn):
        return "asyncgen"
    if inspect.iscoroutinefunction(fn):
        return "async"
    return "sync"


def _context_param(fn: Callable[..., Any], name: str) -> str | None:
    """The parameter annotated `ToolContext`, if any (recognised by its type, whatever
    its name)."""
    hints = get_type_hints(fn)
    found = [p for p in inspect.signature(fn).parameters if hints.get(p) is ToolContext]
    if len(found) > 1:
        raise TypeError(f"tool {name!r}: more than one ToolContext parameter {found}")
    return found[0] if found else None


def _arguments_model(fn: Callable[..., Any], name: str, skip: str | None) -> type[BaseModel]:
    hints = get_type_hints(fn)
    fields: dict[str, Any] = {}
    for param in inspect.signature(fn).parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise TypeError(f"tool {name!r}: *args and **kwargs cannot be described by a schema")
        if param.name == skip:
            continue
        annotation = hints.get(param.name, Any)
        default = ... if param.default is inspect.Parameter.empty else param.default
        fields[param.name] = (annotation, default)
    model: type[BaseModel] = create_model(
        f"{name}_input", __config__=ConfigDict(extra="forbid"), **fields
    )
    return model


def _schema(model: type[BaseModel]) -> dict[str, Any]:
    schema = model.model_json_schema()
    schema.pop("title", None)
    for prop in schema.get("properties", {}).values():
        if isinstance(prop, dict):
            prop.pop("title", None)
    return schema


def make_tool(
    fn: Callable[..., Any],
    *,
    name: str | None = None,
    description: str | None = None,
    to_model_output: Callable[..., Any] | None = None,
) -> FunctionTool:
    tool_name = name or fn.__name__
    context_param = _context_param(fn, tool_name)
    arguments = _arguments_model(fn, tool_name, context_param)
    if to_model_output is not None:
        # A hook like any other, under the tool's name: the worker that runs the tool
        # registered it, so its calls convert their outputs where they ran.
        register_converter(tool_name, to_model_output)
    return FunctionTool(
        name=tool_name,
        description=description or inspect.cleandoc(fn.__doc__ or ""),
        input_schema=_schema(arguments),
        fn=fn,
        kind=_kind(fn),
        arguments=arguments,
        context_param=context_param,
        to_model_output=tool_name if to_model_output is not None else None,
    )


@overload
def tool(fn: Callable[..., Any], /) -> FunctionTool: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    to_model_output: Callable[..., Any] | None = None,
) -> Callable[[Callable[..., Any]], FunctionTool]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    to_model_output: Callable[..., Any] | None = None,
) -> FunctionTool | Callable[[Callable[..., Any]], FunctionTool]:
    """Declare a tool: `@tool` or `@tool(name=..., description=..., to_model_output=fn)`
    (`fn` converts each output into what the model sees: workers/tools/model_output.py)."""
    if fn is not None:
        return make_tool(fn)
    return lambda f: make_tool(
        f, name=name, description=description, to_model_output=to_model_output
    )


def tools_in(module: types.ModuleType) -> list[FunctionTool]:
    """Every `@tool` defined at the top level of a module."""
    return [v for v in vars(module).values() if isinstance(v, FunctionTool)]
