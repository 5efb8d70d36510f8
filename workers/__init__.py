"""agentq's workers: job functions, providers and tool executors."""

from workers.tools import FunctionTool, tool

__all__ = ["FunctionTool", "tool"]
