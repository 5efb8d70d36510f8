"""Run untrusted Python and JavaScript in hardened, pooled containers.

The worker's entry point is `SandboxManager`; see `sandbox/manager.py`. This
package imports neither `orchestrator` nor `workers`.

Exports are loaded lazily so that `python -m agentq.sandbox.images` does not import
the module it is about to run (and so importing `sandbox` stays cheap).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentq.sandbox.backend import SandboxBackend
    from agentq.sandbox.config import SandboxConfig
    from agentq.sandbox.docker_backend import DockerBackend
    from agentq.sandbox.errors import (
        CapacityError,
        DriverProtocolError,
        InvalidRequestError,
        SandboxError,
        SandboxUnavailableError,
        SessionLostError,
    )
    from agentq.sandbox.images import build_images, image_name
    from agentq.sandbox.liveness import Liveness, LocalLiveness
    from agentq.sandbox.manager import SandboxManager
    from agentq.sandbox.models import Artifact, ExecRequest, ExecResult, Language, Limits

_EXPORTS = {
    "Artifact": "agentq.sandbox.models",
    "CapacityError": "agentq.sandbox.errors",
    "DockerBackend": "agentq.sandbox.docker_backend",
    "DriverProtocolError": "agentq.sandbox.errors",
    "ExecRequest": "agentq.sandbox.models",
    "ExecResult": "agentq.sandbox.models",
    "InvalidRequestError": "agentq.sandbox.errors",
    "Language": "agentq.sandbox.models",
    "Limits": "agentq.sandbox.models",
    "Liveness": "agentq.sandbox.liveness",
    "LocalLiveness": "agentq.sandbox.liveness",
    "SandboxBackend": "agentq.sandbox.backend",
    "SandboxConfig": "agentq.sandbox.config",
    "SandboxError": "agentq.sandbox.errors",
    "SandboxManager": "agentq.sandbox.manager",
    "SandboxUnavailableError": "agentq.sandbox.errors",
    "SessionLostError": "agentq.sandbox.errors",
    "build_images": "agentq.sandbox.images",
    "image_name": "agentq.sandbox.images",
}
__all__ = [
    "Artifact",
    "CapacityError",
    "DockerBackend",
    "DriverProtocolError",
    "ExecRequest",
    "ExecResult",
    "InvalidRequestError",
    "Language",
    "Limits",
    "Liveness",
    "LocalLiveness",
    "SandboxBackend",
    "SandboxConfig",
    "SandboxError",
    "SandboxManager",
    "SandboxUnavailableError",
    "SessionLostError",
    "build_images",
    "image_name",
]


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'sandbox' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
