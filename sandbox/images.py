"""Sandbox images: their names, and how to build them without a registry.

Names live here and nowhere else. Both languages have their own name so that
a host that can pull builds them from the official slim images
(`Dockerfile.python`, `Dockerfile.node`); a host without registry access gets
one Debian rootfs holding both `python3` and `node`, imported once and tagged
under both names (one image on disk, two names).

Run `python -m agentq.sandbox.images [--mirror URL] [--tag TAG] [--force]` to build.
"""

from __future__ import annotations

import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import IO

from agentq.sandbox.models import Language

IMAGE_TAG = "v1"
IMAGE_REPOS: dict[Language, str] = {
    "python": "agentq-sandbox-python",
    "javascript": "agentq-sandbox-node",
}
# The user code runs as; created in every image so tools that look up the
# user (getpass, npm) find a name and a home.
SANDBOX_UID = 10001
SANDBOX_USER = "sandbox"
DEFAULT_MIRROR = "http://deb.debian.org/debian"
DEFAULT_SUITE = "bookworm"
DOCKERFILES: dict[Language, str] = {
    "python": "Dockerfile.python",
    "javascript": "Dockerfile.node",
}


def image_name(language: Language, tag: str = IMAGE_TAG) -> str:
    return f"{IMAGE_REPOS[language]}:{tag}"


def default_images(tag: str = IMAGE_TAG) -> dict[Language, str]:
    return {language: image_name(language, tag) for language in IMAGE_REPOS}


class ImageBuildError(RuntimeError):
    """Building the sandbox images failed; the message says which step."""


def build_images(mirror: str | None = None, tag: str = IMAGE_TAG, force: bool = False) -> list[str]:
    """Build the sandbox images from the Debian archive alone; return their names.

    Skips the build when every name already exists, unless `force`. Needs root
    (debootstrap), the `debootstrap` and `docker` commands, and a reachable
    Debian mirror (taken from this machine's apt sources when not given).
    """
    names = sorted(set(default_images(tag).values()))
    if not force and all(_image_exists(name) for name in names):
        return names
    for tool in ("debootstrap", "docker"):
        if shutil.which(tool) is None:
            raise ImageBuildError(f"`{tool}` is not installed (apt-get install {tool})")
    mirror = mirror or find_debian_mirror()
    with tempfile.TemporaryDirectory(prefix="agentq-rootfs-") as tmp:
        rootfs = Path(tmp) / "rootfs"
        run_step(
            [
                "debootstrap",
                "--variant=minbase",
                "--include=python3,nodejs",
                DEFAULT_SUITE,
                str(rootfs),
                mirror,
            ],
            step="debootstrap",
        )
        prepare_rootfs(rootfs)
        _import_rootfs(rootfs, names[0])
    for name in names[1:]:
        run_step(["docker", "tag", names[0], name], step="docker tag")
    return names


def prepare_rootfs(rootfs: Path) -> None:
    """Add the sandbox user, drop setuid bits and caches from a fresh rootfs."""
    with (rootfs / "etc/passwd").open("a") as passwd:
        passwd.write(f"{SANDBOX_USER}:x:{SANDBOX_UID}:{SANDBOX_UID}::/work:/usr/sbin/nologin\n")
    with (rootfs / "etc/group").open("a") as group:
        group.write(f"{SANDBOX_USER}:x:{SANDBOX_UID}:\n")
    (rootfs / "work").mkdir(exist_ok=True)
    # no-new-privileges already neutralises setuid binaries; removing the bits
    # keeps the image safe even if someone runs it without that option.
    for path in rootfs.rglob("*"):
        if path.is_file() and not path.is_symlink() and path.stat().st_mode & 0o6000:
            path.chmod(path.stat().st_mode & ~0o6000)
    for cache in ("var/cache/apt/archives", "var/lib/apt/lists"):
        for entry in (rootfs / cache).glob("*"):
            if entry.is_file():
                entry.unlink()


def _import_rootfs(rootfs: Path, name: str) -> None:
    changes = [
        "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "ENV LANG=C.UTF-8",
        f"USER {SANDBOX_UID}:{SANDBOX_UID}",
        "WORKDIR /work",
        'CMD ["python3"]',
    ]
    import_rootfs(rootfs, name, changes)


def import_rootfs(rootfs: Path, name: str, changes: Sequence[str]) -> None:
    """`docker import` a root filesystem as image `name` with Dockerfile-like `changes`
    (no registry, no build context: the tar of the tree is the image's one layer)."""
    tar = subprocess.Popen(["tar", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE)
    args = ["docker", "import"]
    for change in changes:
        args += ["--change", change]
    try:
        run_step([*args, "-", name], step="docker import", stdin=tar.stdout)
    finally:
        if tar.stdout is not None:
            tar.stdout.close()
        if tar.wait() != 0:
            raise ImageBuildError(f"tar of {rootfs} failed with exit code {tar.returncode}")


def find_debian_mirror(sources_dir: str = "/etc/apt") -> str:
    """The Debian mirror this machine's apt uses (deb822 or one-line format)."""
    deb822 = sorted(glob.glob(os.path.join(sources_dir, "sources.list.d", "*.sources")))
    for path in deb822:
        mirror = parse_deb822_mirror(Path(path).read_text(errors="replace"))
        if mirror:
            return mirror
    one_line = [os.path.join(sources_dir, "sources.list")]
    one_line += sorted(glob.glob(os.path.join(sources_dir, "sources.list.d", "*.list")))
    for path in one_line:
        if os.path.exists(path):
            mirror = parse_one_line_mirror(Path(path).read_text(errors="replace"))
            if mirror:
                return mirror
    return DEFAULT_MIRROR


def parse_deb822_mirror(text: str) -> str | None:
    """First URI of a stanza serving the main suite (not security, not updates)."""
    for stanza in re.split(r"\n\s*\n", text):
        fields: dict[str, str] = {}
        for line in stanza.splitlines():
            if line.startswith("#") or ":" not in line or line[:1].isspace():
                continue
            key, _, value = line.partition(":")
            fields[key.strip().lower()] = value.strip()
        suites = fields.get("suites", "").split()
        if "deb" in fields.get("types", "").split() and DEFAULT_SUITE in suites:
            uris = fields.get("uris", "").split()
            if uris:
                return uris[0]
    return None


def parse_one_line_mirror(text: str) -> str | None:
    for line in text.splitlines():
        parts = line.split("#", 1)[0].split()
        # deb [options] URI SUITE COMPONENTS...
        parts = [p for p in parts if not (p.startswith("[") or p.endswith("]"))]
        if len(parts) >= 3 and parts[0] == "deb" and parts[2] == DEFAULT_SUITE:
            return parts[1]
    return None


def _image_exists(name: str) -> bool:
    found = subprocess.run(["docker", "image", "inspect", name], capture_output=True, check=False)
    return found.returncode == 0


def run_step(
    args: Sequence[str],
    *,
    step: str,
    stdin: IO[bytes] | None = None,
    env: dict[str, str] | None = None,
) -> None:
    """Run one build step; a failure is an ImageBuildError naming the step and its output."""
    result = subprocess.run(
        list(args), stdin=stdin, capture_output=True, text=True, check=False, env=env
    )
    if result.returncode != 0:
        tail = (result.stderr or result.stdout)[-2000:]
        raise ImageBuildError(f"{step} failed (exit {result.returncode}): {tail}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Build agentq sandbox images from Debian.")
    parser.add_argument("--mirror", default=None, help="Debian mirror (default: apt sources)")
    parser.add_argument("--tag", default=IMAGE_TAG)
    parser.add_argument("--force", action="store_true", help="rebuild even if present")
    args = parser.parse_args(argv)
    try:
        names = build_images(mirror=args.mirror, tag=args.tag, force=args.force)
    except ImageBuildError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    for name in names:
        print(name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
