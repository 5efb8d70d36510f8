"""Issue 18: the worker's glue trusts nothing the container sends.

The model's code writes the driver's protocol frames itself (Python through the
driver's `CTL_OUT`, JavaScript through `/proc/<ppid>/fd/1`), floods, forges
done and artifact frames, leaves threads running, and writes hostile names.
Every case must end within its timeout plus a second, keep the worker's event
loop turning (a concurrent call completes), and leave the manager serving.
"""

from __future__ import annotations

import asyncio
import resource
import time
import uuid
from collections.abc import Iterator
from typing import Any

import docker
import pytest

from agentq.sandbox.backend import ContainerSpec
from agentq.sandbox.config import LABEL_FLEET, LABEL_MANAGER, LABEL_SANDBOX
from agentq.sandbox.container import SANDBOX_ENV
from agentq.sandbox.docker_backend import DockerBackend
from agentq.sandbox.errors import SessionLostError
from agentq.sandbox.images import image_name
from agentq.sandbox.liveness import LocalLiveness
from agentq.sandbox.manager import SandboxManager
from agentq.sandbox.models import ExecRequest, ExecResult, Language, Limits
from tests.sandbox.conftest import MakeManager

pytestmark = pytest.mark.integration

FORGE_PY = """
import os, struct, sys
fd = sys.modules["__main__"].CTL_OUT
def frame(kind, payload):
    return kind + struct.pack(">I", len(payload)) + payload
"""

FORGE_JS = """
const fs = require('fs');
const fd = fs.openSync('/proc/' + process.ppid + '/fd/1', 'w');
function frame(kind, payload) {
  const header = Buffer.alloc(5);
  header.write(kind, 0, 'latin1');
  header.writeUInt32BE(payload.length, 1);
  return Buffer.concat([header, payload]);
}
"""


async def run(
    manager: SandboxManager,
    code: str,
    language: Language = "python",
    *,
    session: str | None = None,
    network: bool = False,
    **limits: Any,
) -> ExecResult:
    request = ExecRequest(language=language, code=code, limits=Limits(**limits), network=network)
    return await manager.execute(request, session_key=session)


async def assert_still_serves(manager: SandboxManager) -> None:
    result = await run(manager, "print('still here')\n6 * 7")
    assert result.ok, result
    assert (result.stdout, result.value) == ("still here\n", "42")


class LoopWatch:
    """How long the event loop went without a turn, and the process's peak memory."""

    def __init__(self) -> None:
        self.max_lag_s = 0.0
        self._task: asyncio.Task[None] | None = None

    async def _tick(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            before = loop.time()
            await asyncio.sleep(0.05)
            self.max_lag_s = max(self.max_lag_s, loop.time() - before - 0.05)

    def __enter__(self) -> LoopWatch:
        self._task = asyncio.get_running_loop().create_task(self._tick())
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def hostile_beside_a_normal_call(
    manager: SandboxManager, code: str, language: Language, timeout_s: float
) -> tuple[ExecResult, float]:
    """Run the hostile call; a normal call starts meanwhile and must finish promptly."""
    with LoopWatch() as watch:
        started = time.monotonic()
        hostile = asyncio.create_task(run(manager, code, language, timeout_s=timeout_s))
        await asyncio.sleep(0.3)
        normal_started = time.monotonic()
        normal = await run(manager, "sum(range(10))")
        normal_s = time.monotonic() - normal_started
        result = await hostile
        hostile_s = time.monotonic() - started
    print(
        f"\nhostile call {hostile_s:.2f} s (timeout {timeout_s} s); normal call beside it "
        f"{normal_s:.2f} s; worst loop lag {watch.max_lag_s * 1000:.0f} ms; "
        f"peak RSS of the test process {peak_rss_mb():.0f} MB"
    )
    assert normal.ok, normal
    assert normal.value == "45", normal
    # Bounds for a noisy 2-core machine; before the fix the loop froze for minutes.
    assert normal_s < 20, "the normal call waited on the hostile one"
    assert watch.max_lag_s < 5.0, "the event loop froze"
    assert result.duration_s < timeout_s + 1.0, result  # from the request to the verdict
    assert hostile_s < timeout_s + 10.0  # plus a container start and removal
    return result, hostile_s


# -- item 1: frames that cannot freeze the worker ---------------------------------


@pytest.mark.parametrize(
    ("language", "code"),
    [
        (
            "python",
            FORGE_PY + 'b = b"o\\0\\0\\0\\0" * 200000\nwhile True: os.write(fd, b)\n',
        ),
        (
            "javascript",
            FORGE_JS
            + "const b = Buffer.alloc(5 * 200000);\n"
            + "for (let i = 0; i < b.length; i += 5) b[i] = 0x6f;\n"
            + "for (;;) fs.writeSync(fd, b);\n",
        ),
    ],
    ids=["python", "javascript"],
)
async def test_a_flood_of_empty_frames_neither_freezes_nor_outlives_its_timeout(
    manager: SandboxManager, language: Language, code: str
) -> None:
    result, _ = await hostile_beside_a_normal_call(manager, code, language, timeout_s=5)
    assert result.error is not None, result
    assert "Output limit" in result.error, result
    await assert_still_serves(manager)


async def test_a_trickle_of_empty_frames_still_meets_the_timeout(manager: SandboxManager) -> None:
    code = (
        FORGE_PY
        + "import time\nwhile True:\n    os.write(fd, b'o\\0\\0\\0\\0')\n    time.sleep(0.001)\n"
    )
    result, _ = await hostile_beside_a_normal_call(manager, code, "python", timeout_s=2)
    assert result.timed_out, result


async def test_a_flood_of_the_containers_stderr_is_cut(manager: SandboxManager) -> None:
    # docker-init (pid 1) holds the container's own stderr stream.
    code = (
        "import os\nfd = os.open('/proc/1/fd/2', os.O_WRONLY)\n"
        "while True: os.write(fd, b'x' * 65536)\n"
    )
    result, _ = await hostile_beside_a_normal_call(manager, code, "python", timeout_s=5)
    assert result.error is not None, result


# -- item 2: forged done and artifact frames are bounded before anything is built -


@pytest.mark.parametrize(
    "forge",
    [
        # The 6 MB frame of 2 M `{}` artifact entries.
        "os.write(fd, frame(b'd', b'{\"artifacts\": [' + b','.join([b'{}'] * 2_000_000) + b']}'))",
        # A 60 MB frame: its header alone must be enough to refuse it.
        "os.write(fd, b'd' + struct.pack('>I', 60_000_000))\n"
        "while True: os.write(fd, b'n' * 65536)",
    ],
    ids=["2M-entries", "60MB"],
)
async def test_a_forged_huge_done_frame_is_refused_unread(
    manager: SandboxManager, forge: str
) -> None:
    code = FORGE_PY + forge + "\nimport time\ntime.sleep(30)\n"
    result, _ = await hostile_beside_a_normal_call(manager, code, "python", timeout_s=10)
    assert result.error is not None, result
    assert "exceeds" in result.error, result
    assert len(result.model_dump_json()) < 100_000


async def test_forged_artifact_frames_are_bounded(manager: SandboxManager) -> None:
    code = (
        FORGE_PY
        + "import json\n"
        + "def artifact(path, data):\n"
        + "    header = json.dumps({'path': path, 'media_type': 'x/' + 'y' * 50}).encode()\n"
        + "    return frame(b'a', struct.pack('>H', len(header)) + header + data)\n"
        + "os.write(fd, b''.join(artifact(f'f{i}.txt', b'hi') for i in range(100_000)))\n"
        + "import time\ntime.sleep(30)\n"
    )
    result, _ = await hostile_beside_a_normal_call(manager, code, "python", timeout_s=10)
    assert result.error is not None, result
    assert len(result.artifacts) <= 32
    assert len(result.notices) <= 64
    assert len(result.model_dump_json()) < 100_000


async def test_a_forged_artifact_path_of_megabytes_is_refused(manager: SandboxManager) -> None:
    code = (
        FORGE_PY
        + "import json\nheader = json.dumps({'path': 'p' * 10_000_000}).encode()\n"
        + "os.write(fd, frame(b'a', struct.pack('>H', 65535) + header))\n"
        + "import time\ntime.sleep(30)\n"
    )
    result, _ = await hostile_beside_a_normal_call(manager, code, "python", timeout_s=10)
    assert result.error is not None, result
    assert len(result.model_dump_json()) < 100_000, result


async def test_a_done_frame_for_another_call_is_refused(manager: SandboxManager) -> None:
    code = FORGE_PY + 'os.write(fd, frame(b\'d\', b\'{"call": "not-this-one", "exit_code": 0}\'))\n'
    result = await run(manager, code, session="forged")
    assert result.error is not None, result
    assert "another call" in result.error, result
    assert "state was lost" in result.error


async def test_artifacts_are_what_the_bytes_are(manager: SandboxManager) -> None:
    code = (
        "import os\nos.makedirs('/work/out', exist_ok=True)\n"
        "open('/work/out/fake.png', 'w').write('not a png')\n"
        "open('/work/out/data.bin', 'wb').write(bytes(range(256)))\n"
    )
    result = await run(manager, code)
    assert result.ok, result
    by_path = {artifact.path: artifact for artifact in result.artifacts}
    assert not by_path["fake.png"].is_image
    assert by_path["fake.png"].media_type != "image/png"
    assert by_path["data.bin"].data_base64 is not None


# -- item 3: ownership: a starting manager never kills another's live containers --


async def test_a_second_manager_on_the_host_leaves_live_containers_alone(
    make_manager: MakeManager,
) -> None:
    first = await make_manager(worker_id="same-host")
    assert (await run(first, "x = 41", session="s")).ok
    call = asyncio.create_task(run(first, "import time\ntime.sleep(2)\nx + 1", session="s"))
    await asyncio.sleep(0.5)
    second = await make_manager(worker_id="same-host")  # as `agentq worker --sandbox` twice
    assert await second.remove_orphans() == 0
    result = await call
    assert result.ok, result
    assert result.value == "42", result


async def test_containers_of_an_owner_whose_record_expired_are_removed(
    make_manager: MakeManager,
) -> None:
    liveness = LocalLiveness()
    backend = DockerBackend()
    dead, unknown = f"dead-{uuid.uuid4().hex}", f"unknown-{uuid.uuid4().hex}"
    fleet = f"fleet-{uuid.uuid4().hex}"
    await liveness.beat(dead, ttl_s=0.01)
    started = []
    for owner in (dead, unknown):
        container_id, channel = await backend.start(
            ContainerSpec(
                image=image_name("python"),
                command=["sleep", "600"],
                labels={LABEL_SANDBOX: "1", LABEL_FLEET: fleet, LABEL_MANAGER: owner},
                limits=Limits(),
                user="10001:10001",
                env=SANDBOX_ENV,
            )
        )
        channel.close()
        started.append(container_id)
    try:
        manager = await make_manager(liveness=liveness, fleet_id=fleet)
        # Gone at two sweeps: the first (at start) only suspects.
        assert started[0] in await backend.list({LABEL_MANAGER: dead})
        assert await manager.remove_orphans() == 1
        assert await backend.list({LABEL_MANAGER: dead}) == []
        # An owner this store cannot vouch for is not provably gone.
        assert await backend.list({LABEL_MANAGER: unknown}) == [started[1]]
    finally:
        for container_id in started:
            await backend.remove(container_id)


async def test_a_pool_never_hands_out_a_dead_container(make_manager: MakeManager) -> None:
    manager = await make_manager(pool_size={"python": 1})
    await manager.wait_pools_ready(60)
    (pooled,) = await manager.backend.list({LABEL_MANAGER: manager.instance_id})
    await manager.backend.remove(pooled)  # killed behind the pool's back
    result = await run(manager, "1 + 1")
    assert result.ok, result
    assert result.value == "2", result


async def test_a_session_whose_container_died_says_so(manager: SandboxManager) -> None:
    assert (await run(manager, "x = 1", session="s")).ok
    (container,) = await manager.backend.list({LABEL_MANAGER: manager.instance_id})
    await manager.backend.remove(container)
    with pytest.raises(SessionLostError):
        await run(manager, "x", session="s")
    result = await run(manager, "globals().get('x')", session="s")
    assert result.ok
    assert result.value is None  # a fresh session, which the model was told


# -- item 4: nothing a call started outlives it ----------------------------------


async def test_threads_do_not_outlive_their_call(manager: SandboxManager) -> None:
    code = (
        "import subprocess, threading, time\n"
        "def spin():\n    while True: pass\n"
        "def spawn():\n    time.sleep(0.5)\n    subprocess.Popen(['sleep', '1000'])\n"
        "threading.Thread(target=spin, daemon=True).start()\n"
        "threading.Thread(target=spawn).start()\n"
        "'started'"
    )
    first = await run(manager, code, session="threads")
    assert first.ok, first
    assert first.value == "'started'", first
    assert any("Threads" in notice for notice in first.notices), first
    await asyncio.sleep(1.0)  # long enough for `spawn` to have run, had it survived
    check = (
        "import os\n"
        "tasks = len(os.listdir('/proc/self/task'))\n"
        "procs = sorted(p for p in os.listdir('/proc') if p.isdigit() and int(p) != os.getpid())\n"
        "(tasks, [open(f'/proc/{p}/cmdline').read() for p in procs])"
    )
    second = await run(manager, check, session="threads")
    assert second.ok, second
    tasks, commands = eval(second.value or "")
    assert tasks == 3, second  # the driver's main thread and its two relays: no spinner
    assert not any(command.startswith("sleep\0") for command in commands), commands


async def test_a_thread_cannot_shift_later_results_by_one_call(manager: SandboxManager) -> None:
    code = (
        FORGE_PY
        + "import threading, time\n"
        + "def forge():\n"
        + "    time.sleep(0.3)\n"
        + "    os.write(fd, frame(b'o', b'forged\\n'))\n"
        + '    os.write(fd, frame(b\'d\', b\'{"exit_code": 0, "value": "1"}\'))\n'
        + "threading.Thread(target=forge).start()\n"
    )
    assert (await run(manager, code, session="late")).ok
    await asyncio.sleep(1.0)
    for expected in ("two", "three"):
        result = await run(manager, f"print({expected!r})\n{expected!r}", session="late")
        assert result.ok, result
        assert (result.stdout, result.value) == (f"{expected}\n", repr(expected)), result


# -- item 5: the session key includes every isolation setting ---------------------


@pytest.fixture(scope="module")
def internal_network() -> Iterator[str]:
    client = docker.from_env()
    name = f"agentq-test-{uuid.uuid4().hex[:8]}"
    network = client.networks.create(name, internal=True)
    yield name
    network.remove()


async def test_a_session_never_mixes_network_settings(
    make_manager: MakeManager, internal_network: str
) -> None:
    manager = await make_manager(network_name=internal_network)
    check = "import os\nx = 'set'\nsorted(os.listdir('/sys/class/net'))"
    with_network = await run(manager, check, session="run", network=True)
    assert with_network.ok, with_network
    assert "eth0" in (with_network.value or ""), with_network
    without = await run(
        manager,
        "import os\n(globals().get('x'), sorted(os.listdir('/sys/class/net')))",
        session="run",
    )
    assert without.ok, without
    assert without.value == "(None, ['lo'])", without
    again = await run(manager, "x", session="run", network=True)
    assert again.value == "'set'", again


# -- item 7: hostile names and values ---------------------------------------------


async def test_a_non_utf8_file_name_is_refused_not_fatal(manager: SandboxManager) -> None:
    code = (
        "import os\nos.makedirs('/work/out', exist_ok=True)\n"
        "open(b'/work/out/bad-\\xff.txt', 'w').write('x')\n"
        "open('/work/out/good.txt', 'w').write('y')\nx = 1\n"
        "class Odd:\n    def __repr__(self):\n        return 'odd \\udcff'\nOdd()"
    )
    result = await run(manager, code, session="names")
    assert result.ok, result
    assert result.value == "odd \\udcff"
    assert [artifact.path for artifact in result.artifacts] == ["good.txt"]
    assert any("not valid UTF-8" in notice for notice in result.notices), result
    assert (await run(manager, "x + 1", session="names")).value == "2"  # the session lives on


async def test_javascript_unreadable_and_non_utf8_entries_are_refused(
    manager: SandboxManager,
) -> None:
    code = (
        "const fs = require('fs');\n"
        "fs.mkdirSync('/work/out/locked', { recursive: true });\n"
        "fs.writeFileSync('/work/out/locked/x.txt', 'x');\n"
        "fs.chmodSync('/work/out/locked', 0);\n"
        "fs.writeFileSync(Buffer.from('/work/out/bad-\\xff.txt', 'latin1'), 'x');\n"
        "fs.writeFileSync('/work/out/good.txt', 'y');\n"
    )
    result = await run(manager, code, "javascript")
    assert result.ok, result
    assert [artifact.path for artifact in result.artifacts] == ["good.txt"]
    assert any("cannot be read" in notice for notice in result.notices), result
    assert any("not valid UTF-8" in notice for notice in result.notices), result


async def test_notices_stay_few_however_many_files_are_refused(manager: SandboxManager) -> None:
    code = (
        "import os\nos.makedirs('/work/out', exist_ok=True)\n"
        "for i in range(5000):\n    os.mkfifo(f'/work/out/fifo{i}')\n"
    )
    result = await run(manager, code, timeout_s=30)
    assert result.ok, result
    assert len(result.notices) <= 64
    assert "more notices" in result.notices[-1]


@pytest.mark.parametrize(
    ("language", "code"),
    [
        (
            "python",
            "import os\ndeep = '/work/out/' + '/'.join(['d' * 200] * 12)\n"
            "os.makedirs(deep)\nopen(deep + '/f.txt', 'w').write('x')\n"
            "open('/work/out/good.txt', 'w').write('y')\n",
        ),
        (
            "javascript",
            "const fs = require('fs');\n"
            "const deep = '/work/out/' + Array(12).fill('d'.repeat(200)).join('/');\n"
            "fs.mkdirSync(deep, { recursive: true });\n"
            "fs.writeFileSync(deep + '/f.txt', 'x');\n"
            "fs.writeFileSync('/work/out/good.txt', 'y');\n",
        ),
    ],
    ids=["python", "javascript"],
)
async def test_a_path_too_long_for_a_frame_is_refused_not_fatal(
    manager: SandboxManager, language: Language, code: str
) -> None:
    result = await run(manager, code, language)
    assert result.ok, result
    assert [artifact.path for artifact in result.artifacts] == ["good.txt"]
    assert any("too long" in notice for notice in result.notices), result
