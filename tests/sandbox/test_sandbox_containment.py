"""The issue's "Must hold" list, against a real Docker engine.

Each case checks that the hostile code is contained and reported clearly, and
that the same manager then still serves a normal call. The `make_manager`
fixture asserts at teardown that no container was left behind.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
from typing import Any

import pytest

from agentq.sandbox.errors import InvalidRequestError
from agentq.sandbox.manager import SandboxManager
from agentq.sandbox.models import ExecRequest, ExecResult, Language, Limits

pytestmark = pytest.mark.integration


async def run(
    manager: SandboxManager,
    code: str,
    language: Language = "python",
    *,
    session: str | None = None,
    **limits: Any,
) -> ExecResult:
    request = ExecRequest(language=language, code=code, limits=Limits(**limits))
    return await manager.execute(request, session_key=session)


async def assert_still_serves(manager: SandboxManager) -> None:
    result = await run(manager, "print('still here')\n6 * 7")
    assert result.ok, result
    assert result.stdout == "still here\n"
    assert result.value == "42"


# -- resource exhaustion ------------------------------------------------------


async def test_fork_bomb_is_contained(manager: SandboxManager) -> None:
    code = "import os\nwhile True:\n    os.fork()\n"
    result = await run(manager, code, pids=32, timeout_s=10)
    assert result.exit_code != 0
    assert "Resource temporarily unavailable" in result.stderr or result.error, result
    await assert_still_serves(manager)


async def test_shell_fork_bomb_is_contained(manager: SandboxManager) -> None:
    code = "import subprocess\nsubprocess.run(['sh', '-c', 'f() { f | f & }; f; sleep 2'])\n"
    result = await run(manager, code, pids=32, timeout_s=10)
    assert not result.timed_out, result
    await assert_still_serves(manager)


@pytest.mark.parametrize(
    ("language", "code"),
    [
        ("python", "chunks = []\nwhile True:\n    chunks.append(b'x' * 10_000_000)\n"),
        ("javascript", "const a = [];\nwhile (true) a.push(Buffer.alloc(10_000_000, 1));\n"),
    ],
)
async def test_memory_bomb_is_killed_and_reported(
    manager: SandboxManager, language: Language, code: str
) -> None:
    result = await run(manager, code, language, memory_mb=64, timeout_s=20)
    assert result.error is not None
    assert "Out of memory" in result.error, result
    assert "64 MB" in result.error
    assert not result.timed_out
    await assert_still_serves(manager)


async def test_filling_the_work_dir_tmp_and_shm_fails_inside(manager: SandboxManager) -> None:
    code = """
import errno
report = {}
for path in ("/work/fill", "/tmp/fill", "/dev/shm/fill", "/fill", "/usr/fill"):
    try:
        with open(path, "wb") as handle:
            for _ in range(64):
                handle.write(b"x" * 1_000_000)
                handle.flush()
        report[path] = "wrote 64 MB"
    except OSError as exc:
        report[path] = errno.errorcode.get(exc.errno, str(exc.errno))
print(report)
report
"""
    result = await run(manager, code, workdir_mb=8, tmp_mb=4, shm_mb=4, timeout_s=20)
    assert result.ok, result
    report = eval(result.value or "{}")  # the repr of a dict of str
    assert report["/work/fill"] in ("ENOSPC", "EFBIG")
    assert report["/tmp/fill"] in ("ENOSPC", "EFBIG")
    assert report["/dev/shm/fill"] in ("ENOSPC", "EFBIG")
    assert report["/fill"] == "EROFS"  # the root filesystem is read-only
    assert report["/usr/fill"] == "EROFS"
    await assert_still_serves(manager)


# -- time ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("language", "code"),
    [
        ("python", "while True:\n    pass\n"),
        ("python", "import time\ntime.sleep(10**6)\n"),
        ("python", "import subprocess\nsubprocess.run(['sleep', 'infinity'])\n"),
        ("javascript", "while (true) {}\n"),
        ("javascript", "setInterval(() => {}, 1000);\n"),
    ],
    ids=["py-busy-loop", "py-sleep", "sh-sleep", "js-busy-loop", "js-timer"],
)
async def test_runaway_code_times_out(
    manager: SandboxManager, language: Language, code: str
) -> None:
    result = await run(manager, code, language, timeout_s=1.5)
    assert result.timed_out
    assert result.exit_code is None
    assert result.error is not None
    assert "Timed out" in result.error
    assert "1.5 s" in result.error
    await assert_still_serves(manager)


@pytest.mark.parametrize(
    ("language", "code"),
    [
        ("python", "import sys\ndata = sys.stdin.read()\nprint(repr(data))\n"),
        ("python", "import os\nprint(os.read(0, 10))\n"),
        ("python", "input()\n"),
        (
            "javascript",
            "let n = 0;\nprocess.stdin.on('data', (d) => { n += d.length; });\n"
            "process.stdin.on('end', () => console.log('eof', n));\n",
        ),
    ],
    ids=["py-read", "py-os-read", "py-input", "js-stdin"],
)
async def test_reading_stdin_sees_eof_at_once(
    manager: SandboxManager, language: Language, code: str
) -> None:
    result = await run(manager, code, language, timeout_s=10)
    assert not result.timed_out, result
    if code == "input()\n":
        assert "EOFError" in result.stderr
    else:
        assert result.ok, result
        # Node consumed stdin for the program itself: the code's stdin is closed.
        assert result.stdout.strip() in ("''", "b''", "eof 0", "")


# -- output -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("language", "code"),
    [
        ("python", "import sys\nfor _ in range(100):\n    sys.stdout.write('x' * 1_000_000)\n"),
        ("javascript", "for (let i = 0; i < 100; i++) process.stdout.write('x'.repeat(1e6));\n"),
        ("python", "import os\nos.system('yes')\n"),
    ],
    ids=["py-100MB", "js-100MB", "sh-yes"],
)
async def test_flood_of_stdout_is_cut_at_the_cap(
    manager: SandboxManager, language: Language, code: str
) -> None:
    result = await run(manager, code, language, output_bytes=10_000, timeout_s=30)
    assert result.stdout_truncated
    assert len(result.stdout.encode()) == 10_000
    assert result.error is not None
    assert "Output limit" in result.error
    assert not result.timed_out
    await assert_still_serves(manager)


async def test_one_huge_line_on_stderr_is_cut(manager: SandboxManager) -> None:
    code = "import sys\nsys.stderr.write('y' * 20_000_000)\n"
    result = await run(manager, code, output_bytes=1000)
    assert result.stderr_truncated
    assert not result.stdout_truncated
    assert result.stderr == "y" * 1000
    assert result.error is not None
    assert "stderr exceeded 1000 bytes" in result.error


async def test_invalid_utf8_is_replaced_not_fatal(manager: SandboxManager) -> None:
    code = (
        "import sys\n"
        "sys.stdout.buffer.write(b'ok \\xff\\xfe\\xc3 done')\n"
        "sys.stderr.buffer.write(b'\\x80\\x81')\n"
        "print('\\udcff')\n"  # a lone surrogate in a str
    )
    result = await run(manager, code)
    assert result.exit_code == 0, result
    assert result.stdout.startswith("ok \ufffd\ufffd\ufffd done")
    assert "\\udcff" in result.stdout
    assert result.stderr == "\ufffd\ufffd"


# -- network ------------------------------------------------------------------

_NETWORK_PROBE = """
import json, os, socket
report = {"interfaces": sorted(os.listdir("/sys/class/net"))}
def attempt(name, action):
    try:
        action()
        report[name] = "ok"
    except OSError as exc:
        report[name] = type(exc).__name__ + ":" + str(exc.errno)
def tcp(host, port):
    with socket.create_connection((host, port), timeout=3):
        pass
def udp(host, port):
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.sendto(b"ping", (host, port))
# 192.0.2.1 is TEST-NET-1 (RFC 5737): never routed anywhere.
attempt("tcp_out", lambda: tcp("192.0.2.1", 80))
attempt("udp_out", lambda: udp("192.0.2.1", 53))
attempt("dns", lambda: socket.getaddrinfo("example.com", 80))
attempt("tcp_host_loopback", lambda: tcp("127.0.0.1", HOST_PORT))
attempt("udp_host_loopback", lambda: udp("127.0.0.1", HOST_PORT))
print(json.dumps(report))
"""


async def test_no_network_egress(manager: SandboxManager) -> None:
    # A listener on the host's loopback: the sandbox must not reach it.
    with (
        socket.socket(socket.AF_INET, socket.SOCK_STREAM) as tcp_server,
        socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp_server,
    ):
        tcp_server.bind(("127.0.0.1", 0))
        tcp_server.listen()
        port = tcp_server.getsockname()[1]
        udp_server.bind(("127.0.0.1", port))
        udp_server.setblocking(False)
        code = _NETWORK_PROBE.replace("HOST_PORT", str(port))
        result = await run(manager, code, timeout_s=20)
        assert result.ok, result
        report = json.loads(result.stdout)
        tcp_server.setblocking(False)
        with pytest.raises(BlockingIOError):
            tcp_server.accept()
        with pytest.raises(BlockingIOError):
            udp_server.recv(100)
    assert report["interfaces"] == ["lo"]
    unreachable = f"OSError:{101}"  # ENETUNREACH: no route, so no packet ever left
    assert report["tcp_out"] == unreachable
    assert report["udp_out"] == unreachable
    assert report["dns"].startswith("gaierror")
    # Only the container's own loopback exists; nothing listens on it.
    assert report["tcp_host_loopback"] == "ConnectionRefusedError:111"


async def test_javascript_has_no_network(manager: SandboxManager) -> None:
    code = """
const net = require('net');
const dns = require('dns');
dns.lookup('example.com', (err) => console.log('dns', err ? err.code : 'ok'));
const s = net.connect(80, '192.0.2.1');
s.on('error', (err) => console.log('tcp', err.code));
s.on('connect', () => console.log('tcp', 'ok'));
"""
    result = await run(manager, code, "javascript", timeout_s=20)
    assert result.ok, result
    lines = sorted(result.stdout.split("\n"))
    assert "tcp ENETUNREACH" in lines
    assert any(line.startswith("dns E") for line in lines), lines


# -- the host -----------------------------------------------------------------


async def test_no_host_files_or_secrets(
    manager: SandboxManager, monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    secret = "agentq-test-secret-4b1d"
    monkeypatch.setenv("AGENTQ_TEST_SECRET", secret)
    marker = tmp_path / "host-marker.txt"
    marker.write_text(secret)
    code = f"""
import os
found = []
for pid in os.listdir("/proc"):
    if pid.isdigit():
        try:
            found.append(open(f"/proc/{{pid}}/environ", "rb").read().decode(errors="replace"))
        except OSError:
            pass
print("\\n".join(found))
print("marker", os.path.exists({str(marker)!r}))
try:
    open("/etc/shadow").read()
    print("shadow readable")
except OSError as exc:
    print("shadow", type(exc).__name__)
print("env", sorted(os.environ))
"""
    result = await run(manager, code)
    assert result.ok, result
    assert secret not in result.stdout
    assert "marker False" in result.stdout
    assert "shadow PermissionError" in result.stdout
    environ_1 = result.stdout.split("\n")[0].split("\0")
    names = {entry.split("=", 1)[0] for entry in environ_1 if entry}
    assert names <= {"PATH", "HOME", "LANG", "HOSTNAME", "PYTHONDONTWRITEBYTECODE"}
    assert "env ['HOME', 'HOSTNAME', 'LANG', 'PATH', 'PYTHONDONTWRITEBYTECODE'" in result.stdout


async def test_no_docker_socket(manager: SandboxManager) -> None:
    code = """
import os, stat
sockets = []
for top in ("/", "/run", "/var/run", "/tmp", "/work", "/dev", "/var/lib", "/home"):
    for dirpath, dirnames, filenames in os.walk(top):
        if dirpath.startswith(("/proc", "/sys")):
            dirnames[:] = []
            continue
        for name in filenames:
            try:
                if stat.S_ISSOCK(os.lstat(os.path.join(dirpath, name)).st_mode):
                    sockets.append(os.path.join(dirpath, name))
            except OSError:
                pass
        if top == "/":
            dirnames[:] = [d for d in dirnames if d not in ("proc", "sys", "usr")]
print(sorted(set(sockets)))
print([p for p in ("/var/run/docker.sock", "/run/docker.sock") if os.path.exists(p)])
print("DOCKER_HOST" in os.environ)
"""
    result = await run(manager, code, timeout_s=20)
    assert result.ok, result
    assert result.stdout.split("\n")[:3] == ["[]", "[]", "False"]


async def test_privilege_escalation_attempts_fail(manager: SandboxManager) -> None:
    code = f"""
import ctypes, os, subprocess
libc = ctypes.CDLL(None, use_errno=True)
def errno_of(result):
    return "ok" if result == 0 else os.strerror(ctypes.get_errno())
print("mount", errno_of(libc.mount(b"tmpfs", b"/mnt", b"tmpfs", 0, None)))
print("unshare-user", errno_of(libc.unshare(0x10000000)))
print("unshare-mount", errno_of(libc.unshare(0x00020000)))
print("unshare-net", errno_of(libc.unshare(0x40000000)))
print("setuid", errno_of(libc.setuid(0)))
print("setgid", errno_of(libc.setgid(0)))
# ptrace: only processes of this sandbox are visible; the host's are not there.
print("ptrace-host", errno_of(libc.ptrace(16, {os.getpid()}, None, None)))
print("pids", sorted(int(p) for p in os.listdir("/proc") if p.isdigit()))
print("init", open("/proc/1/cmdline").read().split("\\0")[0])
for cmd in (["mount", "-t", "tmpfs", "none", "/mnt"], ["unshare", "-r", "id"], ["su", "-c", "id"]):
    done = subprocess.run(cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    print("tool-" + cmd[0], "exit", done.returncode)
status = dict(line.split(":", 1) for line in open("/proc/self/status"))
print("CapEff", status["CapEff"].strip(), "NoNewPrivs", status["NoNewPrivs"].strip(),
      "Seccomp", status["Seccomp"].strip())
"""
    result = await run(manager, code, timeout_s=20)
    assert result.ok, result
    lines = dict(line.split(" ", 1) for line in result.stdout.strip().split("\n"))
    assert lines["mount"] == "Operation not permitted"
    assert lines["unshare-user"] == "Operation not permitted"
    assert lines["unshare-mount"] == "Operation not permitted"
    assert lines["unshare-net"] == "Operation not permitted"
    assert lines["setuid"] == "Operation not permitted"
    assert lines["setgid"] == "Operation not permitted"
    pids = json.loads(lines["pids"])
    if os.getpid() not in pids:
        assert lines["ptrace-host"] == "No such process"
    assert lines["init"] == "/sbin/docker-init"
    assert max(pids) < 64  # a fresh PID namespace: no host process is visible
    for tool in ("mount", "unshare", "su"):
        assert lines[f"tool-{tool}"] != "exit 0"
    assert lines["CapEff"] == "0000000000000000 NoNewPrivs 1 Seccomp 2"


@pytest.mark.parametrize(
    ("language", "code"),
    [
        ("python", "import os, json\nprint(json.dumps([os.getuid(), os.geteuid(), os.getgid()]))"),
        ("javascript", "console.log(JSON.stringify([process.getuid(), process.geteuid()]))"),
        (
            "python",
            "import subprocess\nprint(subprocess.run(['id', '-u'], capture_output=True,"
            " text=True).stdout.strip())",
        ),
    ],
    ids=["python", "javascript", "shell"],
)
async def test_code_does_not_run_as_root(
    manager: SandboxManager, language: Language, code: str
) -> None:
    result = await run(manager, code, language)
    assert result.ok, result
    ids = json.loads(result.stdout)
    ids = ids if isinstance(ids, list) else [ids]
    assert ids
    assert all(value == 10001 for value in ids)


# -- leaks between calls -------------------------------------------------------

_START_BACKGROUND = """
import os, subprocess, time
subprocess.Popen(["setsid", "nohup", "sleep", "1000"], stdout=subprocess.DEVNULL,
                 stderr=subprocess.DEVNULL, start_new_session=True)
subprocess.Popen(["sh", "-c", "while true; do echo tick >> /work/bg.log; sleep 0.05; done &"])
if os.fork() == 0:
    os.setsid()
    while True:
        with open("/work/fork.log", "a") as log:
            log.write("tick\\n")
        time.sleep(0.05)
time.sleep(0.3)
"""

_LIST_PROCESSES = """
import os, time
def others():
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit() and int(pid) not in (1, os.getpid()):
            try:
                found.append(open(f"/proc/{pid}/cmdline").read().replace("\\0", " ")[:60])
            except OSError:
                pass
    return found
sizes = [os.path.getsize(p) if os.path.exists(p) else 0 for p in ("/work/bg.log", "/work/fork.log")]
time.sleep(0.3)
grown = [os.path.getsize(p) if os.path.exists(p) else 0 for p in ("/work/bg.log", "/work/fork.log")]
print(others(), sizes == grown)
"""


async def test_background_processes_do_not_outlive_their_call(manager: SandboxManager) -> None:
    started = await run(manager, _START_BACKGROUND, session="bg")
    assert started.ok, started
    # Even in a `run` session, where the container is kept, nothing survives the call.
    after = await run(manager, _LIST_PROCESSES, session="bg")
    assert after.ok, after
    assert after.stdout.strip() == "[] True"
    await manager.close_session("bg")


async def test_background_process_of_a_call_session_dies_with_it(
    manager: SandboxManager,
) -> None:
    before = set(await manager.backend.list(manager.labels))
    started = await run(manager, _START_BACKGROUND)
    assert started.ok, started
    await manager.close_session("none")  # drains pending removals
    assert set(await manager.backend.list(manager.labels)) <= before


async def test_no_state_leaks_between_call_sessions(manager: SandboxManager) -> None:
    first = await run(
        manager,
        "secret = 'leak'\n"
        "for path in ('/work/leak', '/tmp/leak', '/dev/shm/leak'):\n"
        "    open(path, 'w').write('leak')\n",
    )
    assert first.ok, first
    second = await run(
        manager,
        "import os\n"
        "[('secret' in globals())] + "
        "[os.path.exists(p) for p in ('/work/leak', '/tmp/leak', '/dev/shm/leak')]",
    )
    assert second.ok, second
    assert second.value == "[False, False, False, False]"


# -- artifacts ----------------------------------------------------------------


async def test_symlink_and_escaping_artifacts_are_refused(manager: SandboxManager) -> None:
    code = """
import os
os.makedirs("out/sub", exist_ok=True)
os.symlink("/etc/passwd", "out/passwd")
os.symlink("/etc", "out/etc")
os.symlink("../secret.txt", "out/sub/up")
open("secret.txt", "w").write("not an artifact")
open("out/../escape.txt", "w").write("written outside out/")
open("out/sub/ok.txt", "w").write("fine")
"""
    result = await run(manager, code, "python")
    assert result.ok, result
    assert [artifact.path for artifact in result.artifacts] == ["sub/ok.txt"]
    notices = " ".join(result.notices)
    assert "out/passwd: a symbolic link; refused" in notices
    assert "out/etc: a symbolic link; refused" in notices
    assert "out/sub/up: a symbolic link; refused" in notices
    assert "root:" not in result.model_dump_json()


async def test_javascript_symlink_artifacts_are_refused(manager: SandboxManager) -> None:
    code = """
const fs = require('fs');
fs.mkdirSync('out', { recursive: true });
fs.symlinkSync('/etc/passwd', 'out/passwd');
fs.writeFileSync('out/ok.txt', 'fine');
"""
    result = await run(manager, code, "javascript")
    assert result.ok, result
    assert [artifact.path for artifact in result.artifacts] == ["ok.txt"]
    assert any("out/passwd: a symbolic link" in notice for notice in result.notices)


async def test_request_paths_escaping_the_work_dir_are_rejected() -> None:
    for path in ("../x", "/etc/passwd", "a/../../b", "a//b", ""):
        with pytest.raises(InvalidRequestError) as info:
            ExecRequest(language="python", code="", files={path: "x"})
        assert info.value.field == "files"


# -- isolation between concurrent calls ----------------------------------------


async def test_bombs_do_not_disturb_a_concurrent_call(make_manager: Any) -> None:
    manager = await make_manager(max_containers=4)
    bombs = [
        run(manager, "import os\nwhile True:\n    os.fork()\n", pids=32, timeout_s=5),
        run(manager, "a = []\nwhile True:\n    a.append(b'x' * 10**7)\n", memory_mb=64),
        run(manager, "while True:\n    print('x' * 10000)\n", output_bytes=5000),
    ]
    normal = run(
        manager,
        "import time\ntotal = 0\nfor i in range(20):\n    total += i\n    time.sleep(0.05)\ntotal",
    )
    *_, result = await asyncio.gather(*bombs, normal)
    assert result.ok, result
    assert result.value == "190"
