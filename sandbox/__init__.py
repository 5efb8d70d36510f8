"""Run untrusted Python and JavaScript in hardened, pooled containers.

The worker's entry point is `SandboxManager`; see `sandbox/manager.py`. This
package imports neither `orchestrator` nor `workers`.
"""

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
