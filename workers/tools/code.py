"""Runs `code` tools in the sandbox: one `SandboxManager` per sandbox worker.

A `session: "run"` tool keeps one container per run (its key is the run id);
`session: "call"` gets a fresh container from the warm pool for every call.
With a Redis URL, container ownership and run sessions are shared with the
other sandbox workers of the deployment (`code_sessions.py`), whose identity
(its fleet id) labels the containers.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from agentq.orchestrator.core.envelopes import SANDBOX_QUEUE
from agentq.orchestrator.core.errors import ToolError, ToolOutputTooLargeError
from agentq.orchestrator.tools import ToolAnnouncement, ToolDef
from agentq.orchestrator.tools.code import CodeToolConfig
from agentq.sandbox import (
    DockerBackend,
    ExecRequest,
    ExecResult,
    InvalidRequestError,
    Limits,
    SandboxConfig,
    SandboxError,
    SandboxManager,
)
from agentq.workers.tools.base import WorkerServices
from agentq.workers.tools.code_sessions import RedisLiveness, SessionRouter, fleet_id
from agentq.workers.tools.context import ToolContext

_INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "code": {"type": "string", "description": "The program to run."},
        "files": {
            "type": "object",
            "description": "Files to create in the work directory before running: path -> text.",
            "additionalProperties": {"type": "string"},
        },
    },
    "required": ["code"],
    "additionalProperties": False,
}

_DESCRIPTIONS = {
    "python": (
        "Run Python 3 code in a sandbox without network access. The value of a final "
        "expression is returned. Files written under /work/out come back as artifacts."
    ),
    "javascript": (
        "Run JavaScript (Node.js) code in a sandbox without network access. Files written "
        "under /work/out come back as artifacts."
    ),
}


# A result is stored in Redis and shown to the model: past this it is a tool error,
# never an attempt to store it (which would fail, and be retried as a Redis error).
MAX_RESULT_BYTES = 48_000_000


def result_output(result: ExecResult, text_chars: int = 64_000) -> dict[str, Any]:
    """The result as the model sees it; images become media parts it can look at.

    A text artifact longer than `text_chars` becomes a media part: the model is
    shown its first `text_chars` characters and a reference, the result keeps it whole.
    """
    output: dict[str, Any] = {
        "exit_code": result.exit_code,
        "stdout": result.stdout + ("\n[stdout truncated]" if result.stdout_truncated else ""),
        "stderr": result.stderr + ("\n[stderr truncated]" if result.stderr_truncated else ""),
        "duration_s": round(result.duration_s, 3),
    }
    if result.value is not None:
        output["value"] = result.value
    if result.error:
        output["error"] = result.error
    if result.notices:
        output["notices"] = result.notices
    artifacts: list[dict[str, Any]] = []
    for artifact in result.artifacts:
        if artifact.is_image and artifact.data_base64 is not None:
            artifacts.append(
                {
                    "type": "media",
                    "path": artifact.path,
                    "media_type": artifact.media_type,
                    "data": artifact.data_base64,
                }
            )
        elif artifact.text is not None and len(artifact.text) > text_chars:
            artifacts.append(
                {
                    "type": "media",
                    "path": artifact.path,
                    "media_type": artifact.media_type,
                    "text_head": artifact.text[:text_chars],
                    "truncated": True,
                    "data": base64.b64encode(artifact.text.encode()).decode("ascii"),
                }
            )
        else:
            artifacts.append(artifact.model_dump(exclude_none=True))
    if artifacts:
        output["artifacts"] = artifacts
    return output


class CodeExecutor:
    kind = "code"
    queue: str | None = SANDBOX_QUEUE
    keeps_runs = True  # a `session: "run"` container, from the run's first call to its end

    def __init__(
        self, config: SandboxConfig | None = None, *, redis_url: str | None = None
    ) -> None:
        self.config = config or SandboxConfig()
        self.redis_url = redis_url
        self.manager: SandboxManager | None = None
        self.sessions: SessionRouter | None = None

    async def start(self, services: WorkerServices | None = None) -> None:
        if self.redis_url is None:
            self.manager = SandboxManager(DockerBackend(), self.config)
            await self.manager.start()
            return
        from agentq.orchestrator.redis.connect import connect

        redis = connect(self.redis_url)
        self.config = self.config.model_copy(update={"fleet_id": await fleet_id(redis)})
        liveness = RedisLiveness(redis, self.config.fleet_id)
        self.manager = SandboxManager(DockerBackend(), self.config, liveness=liveness)
        await self.manager.start()
        self.sessions = SessionRouter(redis, self.manager, liveness)
        await self.sessions.start()

    async def announcements(self, queue: str) -> list[ToolAnnouncement]:
        return [
            ToolAnnouncement(
                name=f"run_{language}",
                kind="code",
                queue=queue,
                server=language,
                description=_DESCRIPTIONS[language],
                input_schema=_INPUT_SCHEMA,
            )
            for language in self.config.images
        ]

    async def execute(self, tool: ToolDef, input: Any, ctx: ToolContext) -> Any:
        if self.manager is None:
            raise ToolError("the sandbox is not started on this worker")
        config = tool.config
        if not isinstance(config, CodeToolConfig):
            raise ToolError(f"the code tool {tool.name!r} has no language")
        if config.network and not self.config.allow_network:
            raise ToolError(
                "this deployment does not allow network in code tools "
                "(AGENTQ_SANDBOX_ALLOW_NETWORK on the sandbox workers)"
            )
        limits = self.config.default_limits.model_copy(
            update=config.limits.model_dump(exclude_none=True)
        )
        try:
            request = ExecRequest(
                language=config.language,
                code=input["code"],
                files=input.get("files") or {},
                limits=Limits.model_validate(limits.model_dump()),
                network=config.network,
            )
            if config.session != "run":
                result = await self.manager.execute(request)
            elif self.sessions is not None:
                result = await self.sessions.execute(request, ctx.run_id)
            else:
                result = await self.manager.execute(request, ctx.run_id)
        except (InvalidRequestError, ValueError) as exc:
            raise ToolError(f"invalid code request: {exc}") from None
        except SandboxError as exc:
            raise ToolError(f"sandbox error: {exc}") from None
        output = result_output(result, request.limits.output_bytes)
        size = len(json.dumps(output))
        if size > MAX_RESULT_BYTES:
            raise ToolOutputTooLargeError(
                f"the code's result is {size} bytes, over {MAX_RESULT_BYTES}"
            )
        return output

    async def release_run(self, run_id: str) -> None:
        if self.sessions is not None:
            await self.sessions.release(run_id)
        elif self.manager is not None:
            await self.manager.close_session(run_id)

    async def aclose(self) -> None:
        if self.sessions is not None:
            await self.sessions.aclose()
        if self.manager is not None:
            await self.manager.aclose()
        if self.sessions is not None:
            await self.sessions.redis.aclose()
