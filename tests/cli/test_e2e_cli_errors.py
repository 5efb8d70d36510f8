"""No traceback ever reaches a user: each input below gives one line on stderr and
the documented exit code (2 the user's input, 3 infrastructure). Real processes,
real redis-servers (one protected by a password, one full), a real HTTP server."""

from __future__ import annotations

import http.server
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import cast

import pytest
import redis

from tests.support.infra import REPO, free_port, missing
from tests.support.waiting import eventually

pytestmark = pytest.mark.e2e

QUICKSTART = "examples/quickstart.json"
TINY = {"model": {"provider": "scripted", "script": [{"text": "hi"}]}, "prompt": "hi"}


def agentq(
    *args: str, env: dict[str, str] | None = None, cwd: Path = REPO, timeout_s: float = 60
) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("AGENTQ_")}
    return subprocess.run(
        [sys.executable, "-m", "agentq", *args],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        cwd=cwd,
        env={**base, "PYTHONPATH": str(REPO), **(env or {})},
        check=False,
    )


def one_line(done: subprocess.CompletedProcess[str], code: int, says: str) -> None:
    assert done.returncode == code, (done.returncode, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("agentq: ") or lines[0].startswith("Error: "), lines
    assert says in lines[0], lines[0]
    assert "Traceback" not in done.stderr


class Server:
    """A redis-server with extra arguments (password, maxmemory)."""

    def __init__(self, *extra: str) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            missing("redis-server", "apt-get install -y redis-server (.ci/install does)")
        self.port = free_port()
        self.dir = tempfile.mkdtemp(prefix="agentq-redis-")
        self.proc = subprocess.Popen(
            [
                str(binary),
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                self.dir,
                *extra,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

        def answering() -> bool:
            try:
                return bool(redis.Redis(port=self.port, socket_connect_timeout=1).ping())
            except redis.AuthenticationError:
                return True  # up, and asking for its password
            except redis.ConnectionError:
                return False

        eventually(answering, "redis-server to start", 10, 0.02)

    def url(self, password: str | None = None) -> str:
        auth = f":{password}@" if password else ""
        return f"redis://{auth}127.0.0.1:{self.port}/0"

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="module")
def protected() -> Iterator[Server]:
    server = Server("--requirepass", "pw")
    yield server
    server.stop()


@pytest.fixture(scope="module")
def full() -> Iterator[Server]:
    server = Server("--maxmemory", "2mb", "--maxmemory-policy", "noeviction")
    client = redis.Redis(port=server.port)
    for i in range(400):
        try:
            client.set(f"filler:{i}", "x" * 20_000)
        except redis.exceptions.OutOfMemoryError:
            break
    yield server
    server.stop()


@pytest.fixture(scope="module")
def http_url() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"redis://127.0.0.1:{server.server_address[1]}/0"
    server.shutdown()


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("localhost:6379", "invalid Redis URL 'localhost:6379'"),
        ("http://localhost:6379", "must start with redis://"),
        ("redis://localhost:port/0", "invalid Redis URL"),
    ],
)
@pytest.mark.parametrize("command", [["submit", QUICKSTART], ["worker"], ["runs"], ["status", "r"]])
def test_malformed_redis_urls(command: list[str], url: str, says: str) -> None:
    one_line(agentq(*command, "--redis", url), 2, says)


def test_a_url_pointing_at_an_http_server(http_url: str) -> None:
    one_line(agentq("submit", QUICKSTART, "--redis", http_url), 3, "does not answer like a Redis")
    one_line(agentq("worker", "--redis", http_url), 3, "does not answer like a Redis")


def test_no_password_or_a_wrong_one_against_a_protected_redis(protected: Server) -> None:
    one_line(agentq("worker", "--redis", protected.url()), 3, "Authentication required")
    one_line(agentq("runs", "--redis", protected.url("nope")), 3, "Redis refused the connection")


def test_submitting_while_redis_is_full(full: Server, tmp_path: Path) -> None:
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(TINY))
    one_line(agentq("submit", str(spec), "--redis", full.url()), 3, "out of memory")


def test_an_unreachable_redis() -> None:
    url = f"redis://127.0.0.1:{free_port()}/0"
    one_line(agentq("submit", QUICKSTART, "--redis", url), 3, "cannot reach Redis")


def test_a_spec_that_is_not_utf8(tmp_path: Path) -> None:
    spec = tmp_path / "spec.json"
    spec.write_bytes(b'{"prompt": "caf\xe9"}')
    one_line(agentq("run", str(spec)), 2, "is not UTF-8 text")
    one_line(agentq("submit", str(spec), "--redis", "redis://127.0.0.1:1/0"), 2, "not UTF-8")


def test_events_after_a_negative_seq() -> None:
    done = agentq("events", "r", "--after", "-1", "--redis", "redis://127.0.0.1:1/0")
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert "--after" in done.stderr


@pytest.mark.parametrize(
    ("name", "value", "says"),
    [
        ("AGENTQ_CONCURRENCY", "abc", "invalid environment: AGENTQ_CONCURRENCY='abc'"),
        ("AGENTQ_RATE_LIMITS", "{nope", "invalid environment: AGENTQ_RATE_LIMITS is not valid"),
    ],
)
def test_a_bad_environment_variable(name: str, value: str, says: str) -> None:
    one_line(agentq("run", QUICKSTART, env={name: value}), 2, says)


def test_a_misspelled_variable_is_named_with_the_one_meant(tmp_path: Path) -> None:
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(TINY))
    done = agentq("run", str(spec), "--json", env={"AGENTQ_CONCURENCY": "4"})
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["status"] == "succeeded"
    assert done.stderr.strip().splitlines() == [
        "agentq: warning: AGENTQ_CONCURENCY is not a variable agentq reads: it is ignored "
        "(did you mean AGENTQ_CONCURRENCY?)"
    ]


@pytest.mark.parametrize("command", [["submit", QUICKSTART], ["worker"]])
def test_the_in_memory_redis_is_refused_where_it_would_vanish(command: list[str]) -> None:
    one_line(agentq(*command, "--redis", "memory://"), 2, "needs a shared Redis")
    one_line(agentq(*command), 2, "needs a shared Redis")


def test_a_tools_module_that_fails_to_import(tmp_path: Path) -> None:
    (tmp_path / "brokentools.py").write_text("import os\n\nraise RuntimeError('no config')\n")
    done = agentq("run", str(REPO / QUICKSTART), "--tools", "brokentools", cwd=tmp_path)
    one_line(done, 2, "RuntimeError: no config")
    assert "brokentools.py:3" in done.stderr


def test_one_tool_name_in_two_tools_modules_is_refused(tmp_path: Path) -> None:
    for name, answer in (("first", 1), ("second", 2)):
        (tmp_path / f"{name}.py").write_text(
            f"from agentq import tool\n\n\n@tool\ndef add(a: float, b: float) -> float:\n"
            f'    """Add."""\n    return {answer}\n'
        )
    done = agentq(
        "run", str(REPO / QUICKSTART), "--tools", "first", "--tools", "second", cwd=tmp_path
    )
    one_line(done, 2, "tool 'add' is defined in both 'first' and 'second'")


def test_a_tools_module_in_the_current_directory_imports_by_name(tmp_path: Path) -> None:
    shutil.copy(REPO / "examples/quickstart_tools.py", tmp_path / "mytools.py")
    done = agentq("run", str(REPO / QUICKSTART), "--tools", "mytools", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["status"] == "succeeded"


def test_build_images_without_docker_says_so_at_once(tmp_path: Path) -> None:
    done = agentq("sandbox", "build-images", env={"PATH": str(tmp_path)})
    one_line(done, 3, "`docker` command is not installed")


def test_embedded_code_tools_without_docker_say_what_to_do(tmp_path: Path) -> None:
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({**TINY, "tools": [{"type": "code", "language": "python"}]}))
    done = agentq("run", str(spec), env={"DOCKER_HOST": f"unix://{tmp_path}/no.sock"})
    one_line(done, 2, "this spec uses code tools (run_python)")
    assert "agentq worker --sandbox" in done.stderr


def test_run_timeout_says_timed_out_and_exits_4(tmp_path: Path) -> None:
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(TINY))
    # No worker serves this shared Redis's model queue: the run cannot start.
    server = Server()
    try:
        done = agentq("run", str(spec), "--redis", server.url(), "--timeout", "1")
        assert done.returncode == 4, done.stderr
        assert "timed out after 1 s" in done.stderr
        assert "no live worker serves the 'model' queue" in done.stdout
        indexed = cast(
            list[bytes], redis.Redis(port=server.port).zrange("aq:tenant:default:runs", 0, -1)
        )
        run_id = indexed[0].decode()
        # No --timeout: the run has ended, so the wait returns at once (a budget of a
        # second also bounds the process's own work, which a loaded machine can starve).
        waited = agentq("wait", run_id, "--redis", server.url())
        assert waited.returncode == 1, waited.stderr  # it ended: cancelled
        assert json.loads(waited.stdout)["status"] == "cancelled"
    finally:
        server.stop()


def test_shell_completion_as_documented() -> None:
    script = agentq(env={"_AGENTQ_COMPLETE": "bash_source"})
    assert script.returncode == 0
    assert "_agentq_completion" in script.stdout
    words = agentq(
        env={"_AGENTQ_COMPLETE": "bash_complete", "COMP_WORDS": "agentq wo", "COMP_CWORD": "1"}
    )
    assert words.stdout.split() == ["plain,worker", "plain,workers", "plain,workflow"]


def test_build_images_when_they_exist_says_so(tmp_path: Path) -> None:
    if shutil.which("docker") is None:
        missing("docker", "apt-get install -y docker.io (.ci/sandbox-setup does)")
    probe = subprocess.run(
        ["docker", "image", "inspect", "agentq-sandbox-python:v1"], capture_output=True, check=False
    )
    if probe.returncode != 0:
        missing("the sandbox images", "build them with `agentq sandbox build-images`")
    done = agentq("sandbox", "build-images", "--json")
    assert done.returncode == 0, done.stderr
    assert "exist already" in done.stderr
    assert "agentq-sandbox-python:v1" in json.loads(done.stdout)


def test_following_a_quiet_run_past_its_timeout_blames_the_run_not_redis(
    tmp_path: Path,
) -> None:
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({**TINY, "id": "quiet"}))
    server = Server()  # no worker: the run stays queued, with no event after its start
    try:
        assert agentq("submit", str(spec), "--redis", server.url()).returncode == 0
        done = agentq("events", "quiet", "--follow", "--timeout", "2", "--redis", server.url())
    finally:
        server.stop()
    assert done.returncode == 4, done.stderr
    assert '"type":"start"' in done.stdout
    one_line(done, 4, "run quiet was quiet (no new event; it has not ended)")
    assert "Redis" not in done.stderr


def test_run_json_stays_json_with_console_spans(tmp_path: Path) -> None:
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(TINY))
    done = agentq("run", str(spec), "--json", env={"OTEL_TRACES_EXPORTER": "console"})
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["status"] == "succeeded"
    assert '"name": "invoke_agent' in done.stderr  # the spans went to stderr
