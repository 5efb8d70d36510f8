"""agentq's workers: job functions, providers and tool executors."""

from agentq.workers.tools.function_tools import FunctionTool, tool

__all__ = ["FunctionTool", "tool"]
