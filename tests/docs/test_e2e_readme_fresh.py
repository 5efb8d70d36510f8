"""The README's Quickstart, verbatim, on a fresh Debian 12 (a container of our own
Debian image, as root, with nothing of agentq installed): its first command, from
`apt-get install python3-venv` through `pip install .` to `agentq run`, must work as
written and show the quickstart's answer.

The container shares the host's network (apt and PyPI); the host's CA bundle is lent
to pip for machines behind an intercepting proxy. The clone is the checkout's files
(tracked and untracked, not ignored), copied in. 40 to 75 s, mostly pip."""

from __future__ import annotations

import re
import shutil
import subprocess
import time

import pytest

from agentq.sandbox.images import image_name
from tests.support.infra import REPO, missing

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.walkthrough]

CA = "/tmp/host-ca.crt"
LIMIT_S = 900


def quickstart_command() -> str:
    """The Quickstart's first command: its block up to the `# 2.` step (the tests)."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text[text.index("## Quickstart") :]
    block = re.search(r"```bash\n(.*?)```", section, re.S)
    assert block is not None
    first = block[1].split("\n# 2.")[0]
    lines = [line for line in first.splitlines() if line.strip() and not line.startswith("#")]
    assert any("agentq run" in line for line in lines), lines
    return "\n".join(lines)


def checkout_files() -> bytes:
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        check=True,
    ).stdout
    present = b"\0".join(p for p in listed.split(b"\0") if p and (REPO / p.decode()).exists())
    return subprocess.run(
        ["tar", "-C", str(REPO), "--null", "-T", "-", "-c"],
        input=present,
        capture_output=True,
        check=True,
    ).stdout


def test_the_quickstart_works_verbatim_in_a_fresh_debian_container() -> None:
    if shutil.which("docker") is None or shutil.which("git") is None:
        missing("docker and git", "apt-get install -y docker.io git (.ci/sandbox-setup)")
    image = image_name("python")
    probe = subprocess.run(["docker", "image", "inspect", image], capture_output=True, check=False)
    if probe.returncode != 0:
        missing(image, "build it with `agentq sandbox build-images` (.ci/sandbox-setup does)")
    command = quickstart_command()
    script = f"set -eu\nmkdir -p /root/agentq && cd /root/agentq && tar -x\n{command}\n"
    began = time.monotonic()
    done = subprocess.run(
        [
            "docker",
            "run",
            "--rm",
            "-i",
            "--network",
            "host",
            "--user",
            "0",
            "--env",
            "HOME=/root",
            "--env",
            "DEBIAN_FRONTEND=noninteractive",
            "--env",
            f"PIP_CERT={CA}",
            "--volume",
            f"/etc/ssl/certs/ca-certificates.crt:{CA}:ro",
            image,
            "bash",
            "-c",
            script,
        ],
        input=checkout_files(),
        capture_output=True,
        timeout=LIMIT_S,
        check=False,
    )
    seconds = time.monotonic() - began
    out = done.stdout.decode(errors="replace")
    err = done.stderr.decode(errors="replace")
    print(f"the quickstart in a fresh container took {seconds:.0f} s")
    assert done.returncode == 0, (command, out[-3000:], err[-3000:])
    # What the quickstart shows: the three tool calls and the model's answer.
    assert "liftoff" in out, out[-3000:]
    assert "19.5 + 1.5 = 21" in out, out[-3000:]
