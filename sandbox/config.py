"""How a `SandboxManager` is set up: images, capacity, pools, ceilings."""

from __future__ import annotations

import socket
import uuid

from pydantic import BaseModel, ConfigDict, Field

from agentq.sandbox.images import SANDBOX_UID, default_images
from agentq.sandbox.models import Language, Limits

LABEL_SANDBOX = "agentq.sandbox"  # "1" on every container agentq creates
LABEL_WORKER = "agentq.worker"  # the worker id (host name by default): for people, not cleanup
LABEL_MANAGER = "agentq.manager"  # the owner: one manager instance (uuid) with a liveness record
LABEL_LANGUAGE = "agentq.language"
# The deployment (fleet) the owner belongs to: a manager sweeps only its own fleet's
# containers, because only its own fleet's liveness records are in its store.
LABEL_FLEET = "agentq.fleet"

# Without a shared store a fleet is one process (its managers share `PROCESS_LIVENESS`).
PROCESS_FLEET_ID = f"process-{uuid.uuid4().hex}"


_DEFAULT_POOL_SIZE: dict[Language, int] = {"python": 2, "javascript": 1}


def _default_ceiling() -> Limits:
    return Limits(
        timeout_s=600,
        memory_mb=2048,
        cpus=2,
        output_bytes=1_000_000,
        pids=512,
        workdir_mb=512,
        artifact_bytes=10_000_000,
        artifacts_total_bytes=20_000_000,
        max_artifacts=100,
    )


class SandboxConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    # A name for people (a label on every container). Ownership is the manager's
    # unique instance id, never this: containers are removed by other managers
    # only once their owner's liveness record has expired.
    worker_id: str = Field(default_factory=socket.gethostname, min_length=1, max_length=200)
    # The deployment these containers belong to. Two deployments on one engine (staging
    # and production, two CI runs) must differ: a manager sweeps orphans of its fleet only.
    fleet_id: str = Field(default=PROCESS_FLEET_ID, min_length=1, max_length=200)
    # How long an owner's liveness record lasts without a refresh (refreshed every third).
    owner_ttl_s: float = Field(default=15.0, gt=0)
    images: dict[Language, str] = Field(default_factory=default_images)
    # Whether a request may have network (`network=True`): the deployment's choice. A
    # request for it on a deployment that does not allow it is refused before it runs.
    allow_network: bool = False
    # Idle containers kept started per language (default limits, no network).
    pool_size: dict[Language, int] = Field(default_factory=lambda: dict(_DEFAULT_POOL_SIZE))
    # Containers alive at once, idle pool containers and sessions included.
    max_containers: int = Field(default=8, ge=1)
    admission_timeout_s: float = Field(default=60.0, gt=0)
    session_idle_timeout_s: float = Field(default=600.0, gt=0)
    ready_timeout_s: float = Field(default=30.0, gt=0)
    default_limits: Limits = Field(default_factory=Limits)
    # Requests asking for more than this are refused, field by field.
    limit_ceiling: Limits = Field(default_factory=_default_ceiling)
    user: str = f"{SANDBOX_UID}:{SANDBOX_UID}"
    network_name: str = "bridge"  # for requests with network=True
