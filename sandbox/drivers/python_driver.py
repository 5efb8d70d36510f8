"""The in-container Python driver: the main process of every Python sandbox.

It is never imported on the host; its source is passed to `python3 -c` as the
container's command. Wire protocol (see `sandbox/protocol.py`):

- requests arrive on stdin, one JSON object per line;
- everything goes out on stdout as frames: kind (1 byte), length (4 bytes,
  big endian), payload. `R` ready, `o` stdout chunk, `e` stderr chunk, `a` an
  artifact, `d` done (echoing the request's `call` id).

User code runs *in this process*, in one globals dict kept for the life of the
container: that is what makes `session: "run"` keep interpreter state. Its
file descriptors 1 and 2 are pipes that relay threads frame onto the real
stdout (a private duplicate), and fd 0 is /dev/null, so the code can neither
read the control channel by accident nor forge frames without trying hard;
when it tries, it only lies about its own result: the host still enforces
every limit from outside. After each call every other process in the
container is killed, and if a thread the code started is still running the
driver re-executes itself (same pid, same files, fresh interpreter), so nothing
the code started outlives its call.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import io
import json
import linecache
import os
import signal
import stat
import struct
import sys
import threading
import time
from typing import Any

WORK_DIR = "/work"
OUT_DIR = "/work/out"
CHUNK = 65536

RESTART_ENV = "AGENTQ_DRIVER_FDS"
if RESTART_ENV in os.environ:  # re-executed by restart_interpreter: keep its channel
    CTL_IN, CTL_OUT = (int(fd) for fd in os.environ.pop(RESTART_ENV).split(","))
else:
    CTL_IN = os.dup(0)
    CTL_OUT = os.dup(1)
DRIVER_PID = os.getpid()
_send_lock = threading.Lock()


def send(kind: bytes, payload: bytes) -> None:
    frame = kind + struct.pack(">I", len(payload)) + payload
    with _send_lock:
        view = memoryview(frame)
        while view:
            written = os.write(CTL_OUT, view)
            view = view[written:]


def relay(fd: int, kind: bytes) -> None:
    import select

    while True:
        try:
            chunk = os.read(fd, CHUNK)
            # Coalesce small writes (print in a loop) into fuller frames: the host
            # counts every frame's header against the call's output budget.
            while len(chunk) < CHUNK and select.select([fd], [], [], 0.002)[0]:
                more = os.read(fd, CHUNK - len(chunk))
                if not more:
                    break
                chunk += more
        except OSError:
            break
        if not chunk:
            break
        send(kind, chunk)
    os.close(fd)


def write_files(files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = os.path.join(WORK_DIR, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        # A lone surrogate cannot be UTF-8: replaced, never a crash of the driver.
        with open(path, "w", encoding="utf-8", errors="replace") as handle:
            handle.write(text)


def safe_repr(value: object, limit: int) -> str:
    try:
        text = repr(value)
    except BaseException as exc:  # a broken __repr__ is the code's problem, not ours
        text = f"<repr failed: {type(exc).__name__}: {exc}>"
    if len(text) > limit:
        text = text[:limit] + f"... [{len(text) - limit} more characters]"
    # A lone surrogate (e.g. repr of a str made from bytes) is not valid JSON text
    # for the host: spell it out as an escape.
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


# base64, mimetypes and traceback are imported where used: most calls need
# none of them, and every import is paid on the cold path of a container start.


def print_user_traceback(exc: BaseException) -> None:
    import traceback

    # Skip the driver's own frame so the model sees only its code.
    tb = exc.__traceback__.tb_next if exc.__traceback__ is not None else None
    lines = traceback.format_exception(type(exc), exc, tb)
    sys.stderr.write("".join(lines))


CO_COROUTINE = 0x80  # inspect.CO_COROUTINE: the cell used top-level `await`
COMPILE_FLAGS = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT


def evaluate(body: Any, last: Any, scope: dict[str, Any]) -> object:
    """Run the body, then the trailing expression; one event loop if either awaits."""
    uses_await = bool(body.co_flags & CO_COROUTINE) or (
        last is not None and bool(last.co_flags & CO_COROUTINE)
    )
    if not uses_await:
        exec(body, scope)
        return None if last is None else eval(last, scope)

    async def cell() -> object:
        pending = eval(body, scope)
        if body.co_flags & CO_COROUTINE:
            await pending
        if last is None:
            return None
        value = eval(last, scope)
        return (await value) if last.co_flags & CO_COROUTINE else value

    import asyncio  # only cells that await pay for importing it

    return asyncio.run(cell())


def execute(
    code: str, cell: str, scope: dict[str, Any], value_chars: int
) -> tuple[int, str | None]:
    """Run code like a notebook cell: a trailing expression becomes the value."""
    linecache.cache[cell] = (len(code), None, code.splitlines(True), cell)
    try:
        tree = ast.parse(code, cell, "exec")
        tail = tree.body[-1] if tree.body else None
        last = None
        if isinstance(tail, ast.Expr):
            tree.body.pop()
            last = compile(ast.Expression(tail.value), cell, "eval", flags=COMPILE_FLAGS)
        body = compile(tree, cell, "exec", flags=COMPILE_FLAGS)
        value = evaluate(body, last, scope)
        return 0, None if value is None else safe_repr(value, value_chars)
    except SystemExit as exc:
        if exc.code is None:
            return 0, None
        if isinstance(exc.code, int):
            return exc.code, None
        sys.stderr.write(f"{exc.code}\n")
        return 1, None
    except BaseException as exc:
        print_user_traceback(exc)
        return 1, None


def kill_strays() -> None:
    """Kill every process but init and this one; bounded, so a fork bomb cannot pin us."""
    for _ in range(500):
        try:
            os.kill(-1, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            return
        reap_children()
        time.sleep(0.002)


def reap_children() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


MAX_HEADER = 2000  # the host refuses artifact headers over 2048 bytes


def artifact_header(rel: str) -> bytes | None:
    """The JSON header of an artifact frame; None if the path is too long for one."""
    import mimetypes

    media_type = mimetypes.guess_type(rel)[0] or "application/octet-stream"
    header = json.dumps({"path": rel, "media_type": media_type}).encode()
    return header if len(header) <= MAX_HEADER else None


def send_artifact(header: bytes, data: bytes) -> None:
    """One `a` frame: u16 header length, JSON header, the raw bytes. The host sniffs
    images, decodes text and checks every size itself."""
    send(b"a", struct.pack(">H", len(header)) + header + data)


def read_regular(path: str, cap: int) -> bytes | None:
    """Read at most cap+1 bytes of a regular file without following a symlink."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        chunks: list[bytes] = []
        remaining = cap + 1
        while remaining > 0:
            chunk = os.read(fd, min(CHUNK, remaining))
            if not chunk:
                break
            chunks.append(chunk)
            remaining -= len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


MAX_NOTICES = 40


class Notices(list[str]):
    """At most MAX_NOTICES, then one line counting the rest: 100,000 refused files
    must not make a 100,000-line result."""

    dropped = 0

    def append(self, notice: str) -> None:
        if len(self) < MAX_NOTICES:
            super().append(notice[:500])
        else:
            self.dropped += 1

    def final(self) -> list[str]:
        tail = [f"... and {self.dropped} more notices"] if self.dropped else []
        return list(self) + tail


class Collector:
    """Files new or changed under OUT_DIR since the previous call become artifacts."""

    def __init__(self) -> None:
        self.seen: dict[str, tuple[int, int, int]] = {}
        # After a restart of the interpreter, files already there were returned before.
        for dirpath, _, filenames in os.walk(OUT_DIR):
            for name in filenames:
                full = os.path.join(dirpath, name)
                with contextlib.suppress(OSError):
                    info = os.lstat(full)
                    rel = os.path.relpath(full, OUT_DIR)
                    self.seen[rel] = (info.st_mtime_ns, info.st_size, info.st_ino)

    def collect(self, limits: dict[str, int]) -> Notices:
        """Send the artifacts as frames; return the notices about the rest."""
        count = 0
        notices = Notices()
        if os.path.islink(OUT_DIR) or not os.path.isdir(OUT_DIR):
            if os.path.lexists(OUT_DIR):
                notices.append("out: the output directory is not a plain directory; ignored")
            return notices
        total = 0
        for dirpath, dirnames, filenames in os.walk(OUT_DIR, followlinks=False):
            dirnames.sort()
            for name in list(dirnames):
                if os.path.islink(os.path.join(dirpath, name)):
                    rel = os.path.relpath(os.path.join(dirpath, name), OUT_DIR)
                    notices.append(f"out/{ascii(rel)[1:-1]}: a symbolic link; refused")
                    dirnames.remove(name)
            for name in sorted(filenames):
                full = os.path.join(dirpath, name)
                rel = os.path.relpath(full, OUT_DIR)
                try:
                    rel.encode("utf-8")
                except UnicodeEncodeError:
                    notices.append(f"out/{ascii(rel)[1:-1]}: the name is not valid UTF-8; refused")
                    continue
                header = artifact_header(rel)
                if header is None:
                    notices.append(f"out/{rel[:100]}...: the path is too long; not returned")
                    continue
                refused = self._refusal(full, rel, limits, count, total)
                if refused is not None:
                    if refused:
                        notices.append(refused)
                    continue
                data = read_regular(full, limits["artifact_bytes"])
                if data is None or len(data) > limits["artifact_bytes"]:
                    notices.append(f"out/{rel}: changed while being read; not returned")
                    continue
                total += len(data)
                count += 1
                send_artifact(header, data)
        return notices

    def _refusal(
        self, full: str, rel: str, limits: dict[str, int], count: int, total: int
    ) -> str | None:
        """None: return it; "": skip silently (unchanged); else the reason it is refused."""
        try:
            info = os.lstat(full)
        except OSError:
            return ""
        if stat.S_ISLNK(info.st_mode):
            return f"out/{rel}: a symbolic link; refused"
        if not stat.S_ISREG(info.st_mode):
            return f"out/{rel}: not a regular file; refused"
        signature = (info.st_mtime_ns, info.st_size, info.st_ino)
        if self.seen.get(rel) == signature:
            return ""
        self.seen[rel] = signature
        if count >= limits["max_artifacts"]:
            return f"out/{rel}: more than {limits['max_artifacts']} artifacts; not returned"
        if info.st_size > limits["artifact_bytes"]:
            return (
                f"out/{rel}: {info.st_size} bytes exceeds the "
                f"{limits['artifact_bytes']}-byte artifact limit; not returned"
            )
        if total + info.st_size > limits["artifacts_total_bytes"]:
            return (
                f"out/{rel}: artifacts would exceed "
                f"{limits['artifacts_total_bytes']} bytes in total; not returned"
            )
        return None


def oom_kills() -> int:
    """The container cgroup's OOM-kill count (cgroup v1 or v2); 0 if unreadable."""
    for path in ("/sys/fs/cgroup/memory/memory.oom_control", "/sys/fs/cgroup/memory.events"):
        try:
            with open(path) as handle:
                for line in handle:
                    key, _, count = line.partition(" ")
                    if key == "oom_kill":
                        return int(count)
        except (OSError, ValueError):
            continue
    return 0


def flush_std() -> None:
    for stream in (sys.stdout, sys.stderr):
        # The code may have closed or replaced them.
        with contextlib.suppress(BaseException):
            stream.flush()


def run_call(
    request: dict[str, Any], cell: str, scope: dict[str, Any], collector: Collector
) -> None:
    ooms_before = oom_kills()
    relays: list[threading.Thread] = []
    for target_fd, kind in ((1, b"o"), (2, b"e")):
        read_end, write_end = os.pipe()
        os.dup2(write_end, target_fd)
        os.close(write_end)
        relays.append(threading.Thread(target=relay, args=(read_end, kind), daemon=True))
    for thread in relays:
        thread.start()
    try:
        # The code of an earlier call (run session) may have put a directory or
        # a read-only file where an input file goes: its problem, not ours.
        write_files(request.get("files", {}))
        os.makedirs(OUT_DIR, exist_ok=True)
    except (OSError, ValueError) as exc:
        sys.stderr.write(f"cannot write the input files: {exc}\n")
        exit_code, value = 1, None
    else:
        exit_code, value = execute(
            request["code"], cell, scope, int(request.get("value_chars", 10_000))
        )
    flush_std()
    if os.getpid() != DRIVER_PID:
        # A fork of the code ran off the end of the cell: it must not act as the driver.
        os._exit(exit_code)
    kill_strays()
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)  # closes our write ends, so the relays see EOF
    os.dup2(null, 2)
    os.close(null)
    for thread in relays:
        thread.join(timeout=5.0)
    notices = collector.collect(request["limits"])
    # Threads the code started cannot be killed one by one: if any is still
    # running, the interpreter restarts (below) so that nothing outlives the call.
    restart = threads_left() > 0
    done = {
        "call": str(request.get("call", ""))[:64],
        "exit_code": exit_code,
        "value": value,
        "oom": oom_kills() > ooms_before,
        "notices": notices.final(),
        "restarted": restart,
    }
    send(b"d", json.dumps(done).encode())
    if restart:
        restart_interpreter()


def threads_left() -> int:
    """Threads of this process besides the main one (the relays were joined).

    The kernel's list counts threads `threading` does not know (`_thread`), but
    a joined thread lingers in it for a moment: give those a little time.
    """
    deadline = time.monotonic() + 0.5
    while True:
        try:
            count = len(os.listdir("/proc/self/task")) - 1
        except OSError:
            count = threading.active_count() - 1
        known = threading.active_count() - 1  # running Python threads: no reason to wait
        if count <= 0 or known > 0 or time.monotonic() > deadline:
            return max(count, known)
        time.sleep(0.005)


def restart_interpreter() -> None:
    """Replace this process with a fresh driver: ends every thread, keeps /work.

    The new driver kills strays again and sends a ready frame, which the host waits for.
    """
    # The channel's descriptors are handed over as they are: fds 0-2 stay on
    # /dev/null, so a thread printing in the meantime cannot corrupt the channel.
    os.set_inheritable(CTL_IN, True)
    os.set_inheritable(CTL_OUT, True)
    env = {**os.environ, RESTART_ENV: f"{CTL_IN},{CTL_OUT}"}
    os.execve(sys.executable, sys.orig_argv, env)


def main() -> None:
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.close(null)
    os.makedirs(WORK_DIR, exist_ok=True)
    os.chdir(WORK_DIR)
    sys.path.insert(0, WORK_DIR)  # -I drops the cwd; files passed in should be importable
    sys.argv = ["<code>"]
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(errors="backslashreplace")
    scope: dict[str, Any] = {"__name__": "__main__", "__builtins__": builtins}
    kill_strays()  # after a restart: whatever the last call's threads started
    collector = Collector()
    requests = os.fdopen(CTL_IN, "rb", buffering=CHUNK)
    send(b"R", json.dumps({"pid": DRIVER_PID}).encode())
    for number, line in enumerate(requests, start=1):
        run_call(json.loads(line), f"<cell {number}>", scope, collector)
    # stdin closed: the host is done with this container.


if __name__ == "__main__":
    main()
