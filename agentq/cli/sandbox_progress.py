"""`agentq sandbox build-images` with Docker checked first and progress shown.

The build (debootstrap of a Debian rootfs, then `docker import`) takes about
a minute and prints nothing of its own: this checks what it needs before
starting, says what it does, and shows the elapsed time while it runs.
"""

from __future__ import annotations

import shutil
import subprocess
import threading
import time

from rich.console import Console

from agentq.cli.errors import EXIT_INFRASTRUCTURE, CliError

DOCKER_CHECK_TIMEOUT_S = 15.0


def docker_problem() -> str | None:
    """Why Docker cannot be used here, or None when `docker info` answers."""
    if shutil.which("docker") is None:
        return "the `docker` command is not installed (Debian: apt-get install docker.io)"
    try:
        found = subprocess.run(
            ["docker", "info", "--format", "{{.ServerVersion}}"],
            capture_output=True,
            text=True,
            timeout=DOCKER_CHECK_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return f"the Docker daemon did not answer within {DOCKER_CHECK_TIMEOUT_S:g} s"
    if found.returncode != 0:
        lines = (found.stderr or found.stdout).strip().splitlines()
        return "the Docker daemon is not reachable: " + (
            lines[-1] if lines else "docker info failed"
        )
    return None


def build_with_progress(*, mirror: str | None, force: bool, console: Console) -> list[str]:
    try:
        from agentq.sandbox import images
    except ImportError as exc:
        raise CliError(f"sandbox support is not available: {exc}", EXIT_INFRASTRUCTURE) from None
    problem = docker_problem()
    if problem is not None:
        raise CliError(f"cannot build the sandbox images: {problem}", EXIT_INFRASTRUCTURE)
    names = sorted(set(images.default_images().values()))
    if not force and all(images._image_exists(name) for name in names):
        console.print(
            f"[dim]the sandbox images exist already: {', '.join(names)} (--force rebuilds)[/]"
        )
        return names
    source = mirror or "this machine's Debian mirror"
    console.print(
        f"building {', '.join(names)} from {source}: debootstrap of a Debian rootfs with "
        "python3 and nodejs, then docker import (about a minute)"
    )
    outcome: dict[str, object] = {}

    def work() -> None:
        try:
            outcome["names"] = images.build_images(mirror=mirror, force=True)
        except Exception as exc:
            outcome["error"] = exc

    started = time.monotonic()
    thread = threading.Thread(target=work, name="agentq-build-images", daemon=True)
    thread.start()
    with console.status("building…") as status:
        while thread.is_alive():
            thread.join(0.5)
            status.update(f"building… {time.monotonic() - started:.0f} s")
    if "error" in outcome:
        raise CliError(
            f"building the sandbox images failed: {outcome['error']}", EXIT_INFRASTRUCTURE
        )
    console.print(f"built in {time.monotonic() - started:.0f} s")
    built = outcome["names"]
    assert isinstance(built, list)
    return [str(n) for n in built]
