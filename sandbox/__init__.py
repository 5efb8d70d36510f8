"""Run untrusted Python and JavaScript in hardened, pooled containers.

The worker's entry point is `SandboxManager`; see `sandbox/manager.py`. This
package imports neither `orchestrator` nor `workers`.

Exports are loaded lazily so that `python -m sandbox.images` does not import
the module it is about to run (and so importing `sandbox` stays cheap).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sandbox.backend import SandboxBackend
    from sandbox.config import SandboxConfig
    from sandbox.docker_backend import DockerBackend
    from sandbox.errors import (
        CapacityError,
        DriverProtocolError,
        InvalidRequestError,
        SandboxError,
        SandboxUnavailableError,
    )
    from sandbox.images import build_images, image_name
    from sandbox.manager import SandboxManager
    from sandbox.models import Artifact, ExecRequest, ExecResult, Language, Limits

_EXPORTS = {
    "Artifact": "sandbox.models",
    "CapacityError": "sandbox.errors",
    "DockerBackend": "sandbox.docker_backend",
    "DriverProtocolError": "sandbox.errors",
    "ExecRequest": "sandbox.models",
    "ExecResult": "sandbox.models",
    "InvalidRequestError": "sandbox.errors",
    "Language": "sandbox.models",
    "Limits": "sandbox.models",
    "SandboxBackend": "sandbox.backend",
    "SandboxConfig": "sandbox.config",
    "SandboxError": "sandbox.errors",
    "SandboxManager": "sandbox.manager",
    "SandboxUnavailableError": "sandbox.errors",
    "build_images": "sandbox.images",
    "image_name": "sandbox.images",
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
    "SandboxBackend",
    "SandboxConfig",
    "SandboxError",
    "SandboxManager",
    "SandboxUnavailableError",
    "build_images",
    "image_name",
]


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'sandbox' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
