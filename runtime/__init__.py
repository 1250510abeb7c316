"""OpenProgram runtime: agentic functions, their recursion guard, and the model loop.

Pure Python; never imports Django. The web app plugs in through `runtime.recorder.Recorder`.
"""
from .budget import Budget
from .concurrency import submit
from .context import Frame
from .errors import (BudgetExceeded, CancelledError, DepthCeilingExceeded, ExecLimitExceeded, LoopDetected,
                     OpenProgramError, ToolArgumentError, ToolRegistrationError)
from . import function  # the module is callable: `@function` is the leaf-tool decorator
from .function import Tool, agentic_function, max_recursion_depth
from .hooks import add_pre_invocation_hook, checkpoint, remove_pre_invocation_hook
from .policy import tool_policy
from .prices import set_price
from .recorder import Recorder, use_recorder
from .registry import registry
from .runtime import Runtime, create_runtime, llm, use_runtime

__all__ = [
    "agentic_function", "function", "llm", "Runtime", "create_runtime", "CancelledError",
    "ToolArgumentError", "ToolRegistrationError", "BudgetExceeded", "Budget", "submit",
    "add_pre_invocation_hook", "remove_pre_invocation_hook", "checkpoint", "Recorder", "use_recorder",
    "registry", "max_recursion_depth", "OpenProgramError", "DepthCeilingExceeded", "ExecLimitExceeded",
    "tool_policy", "Frame", "Tool", "use_runtime", "LoopDetected", "set_price",
]
