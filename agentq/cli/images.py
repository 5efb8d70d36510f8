"""The deployment's container images, built with no registry (`agentq images build`).

Each image is a Debian rootfs made by debootstrap from the Debian archive, finished on
the host (users, directories, Python packages) and imported with `docker import`, as
the sandbox images are (`agentq.sandbox.images`). Python packages come from PyPI as
wheels built on the host, then installed inside the rootfs (chroot) with no network:
the host's Python must match Debian's (3.11 for bookworm) so the wheels fit.

    agentq        agentq in the venv /opt/agentq, user 10001, `agentq` as entrypoint:
                  the image the top-level Dockerfile builds from python:3.11-slim
    agentq-redis  Debian's redis-server (the compose file's Redis)
    agentq-dind   Debian's docker.io: the sandbox pool's own Docker engine
    agentq-phoenix  Arize Phoenix from PyPI: the compose file's trace viewer
    agentq-prometheus  Debian's prometheus: the compose file's metrics store (profile
                  monitoring), its scrape config mounted from deploy/monitoring/

Image names live here and nowhere else; docker-compose.yml's defaults repeat them.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path

from agentq.sandbox.images import (
    DEFAULT_SUITE,
    ImageBuildError,
    find_debian_mirror,
    import_rootfs,
    run_step,
)

AGENTQ_UID = 10001
# The label holding what an image was built from (see `fingerprint`).
RECIPE_LABEL = "io.agentq.recipe"
# What the agentq wheel is built from (besides pyproject.toml and README.md).
SOURCE_TREES = ("agentq",)
DEBIAN_PYTHON = (3, 11)  # bookworm's python3
VENV = "/opt/agentq"
BASE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
PYTHON_PACKAGES = ("python3", "python3-venv", "ca-certificates")
# Commands in the rootfs get this environment and nothing of the host's: a host's
# PIP_* settings or REQUESTS_CA_BUNDLE (which overrides pip's --cert) name paths that do
# not exist in there. The host's CA bundle is lent to the rootfs at this path.
CHROOT_CA = "/tmp/host-ca.crt"
CHROOT_ENV = {
    "PATH": BASE_PATH,
    "HOME": "/root",
    "LANG": "C.UTF-8",
    "PIP_CERT": CHROOT_CA,
    "REQUESTS_CA_BUNDLE": CHROOT_CA,
    "SSL_CERT_FILE": CHROOT_CA,
}


def agentq_version() -> str:
    return version("agentq")


@dataclass(frozen=True)
class Recipe:
    """One image: Debian packages, Python requirements, and how it runs."""

    name: str
    packages: tuple[str, ...]
    changes: tuple[str, ...]
    # PyPI requirements (or a source directory / wheel) installed into VENV.
    python: tuple[str, ...] = ()
    # Runs as AGENTQ_UID with this home (None: the image's own user, see `changes`).
    home: str | None = None
    # Directories created for the user that runs the image (volumes).
    owned_dirs: tuple[str, ...] = ()
    # Executable files written into the rootfs: (path, content).
    files: tuple[tuple[str, str], ...] = ()


DIND_ENTRYPOINT = "/usr/local/bin/agentq-dockerd"
# Docker-in-Docker without `--privileged`: a privileged container asks for every
# capability, and a host whose dockerd lacks one (CAP_SYS_RESOURCE on the VMs agentq's CI
# runs on) cannot start it at all. The compose file grants the engine all the capabilities
# but that one and no seccomp/AppArmor profile; what privileged gave besides, writable
# cgroups for the engine's own containers, this script takes.
DIND_SCRIPT = """#!/bin/sh
set -eu
if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
  # cgroup v2: writable, and this process moved out of the root so that the
  # engine's containers may enable controllers (as the docker:dind image does).
  if ! mkdir -p /sys/fs/cgroup/init 2>/dev/null; then
    umount /sys/fs/cgroup
    mount -t cgroup2 -o rw,nosuid,nodev,noexec cgroup2 /sys/fs/cgroup
    mkdir -p /sys/fs/cgroup/init
  fi
  xargs -rn1 < /sys/fs/cgroup/cgroup.procs > /sys/fs/cgroup/init/cgroup.procs 2>/dev/null || :
  sed -e 's/ / +/g' -e 's/^/+/' < /sys/fs/cgroup/cgroup.controllers \\
    > /sys/fs/cgroup/cgroup.subtree_control || :
else
  # cgroup v1: each read-only hierarchy mounted again, writable, with its options.
  for dir in /sys/fs/cgroup/*; do
    [ -d "$dir" ] && [ ! -L "$dir" ] || continue
    line=$(awk -v m="$dir" '$2 == m { print $4 }' /proc/mounts)
    case ",$line," in *,ro,*) ;; *) continue ;; esac
    opts=$(echo "$line" | tr , '\\n' | grep -v -x -e ro -e rw -e nosuid -e nodev -e noexec \\
      -e relatime | paste -sd, -)
    umount "$dir"
    mount -t cgroup -o "rw,nosuid,nodev,noexec,$opts" cgroup "$dir"
  done
fi
exec dockerd "$@"
"""


def recipes(tag: str | None = None, source: str = "") -> dict[str, Recipe]:
    """Every image; `source` is the checkout or wheel the agentq image installs."""
    tag = tag or agentq_version()
    python_user = (
        f"ENV PATH={VENV}/bin:{BASE_PATH}",
        "ENV PYTHONDONTWRITEBYTECODE=1",
        "ENV PYTHONUNBUFFERED=1",
        "ENV LANG=C.UTF-8",
        f"USER {AGENTQ_UID}:{AGENTQ_UID}",
    )
    return {
        "agentq": Recipe(
            name=f"agentq:{tag}",
            packages=PYTHON_PACKAGES,
            python=(source,),
            home="/home/agentq",
            changes=(
                *python_user,
                "WORKDIR /home/agentq",
                'ENTRYPOINT ["agentq"]',
                'CMD ["--help"]',
            ),
        ),
        "redis": Recipe(
            name="agentq-redis:7",
            packages=("redis-server",),
            home="/data",
            owned_dirs=("/data",),
            changes=(
                f"ENV PATH={BASE_PATH}",
                f"USER {AGENTQ_UID}:{AGENTQ_UID}",
                "WORKDIR /data",
                'ENTRYPOINT ["redis-server"]',
                'CMD ["--dir", "/data", "--appendonly", "yes", "--appendfsync", "everysec"]',
            ),
        ),
        "dind": Recipe(
            name="agentq-dind:1",
            packages=("docker.io", "iptables", "ca-certificates", "procps"),
            # dockerd runs as root with every capability the host grants: the one
            # exception, kept to the engine that only the sandbox pool reaches.
            changes=(
                f"ENV PATH={BASE_PATH}",
                "VOLUME /var/lib/docker",
                f'ENTRYPOINT ["{DIND_ENTRYPOINT}"]',
                'CMD ["--host=tcp://0.0.0.0:2375", "--host=unix:///var/run/docker.sock"]',
            ),
            files=((DIND_ENTRYPOINT, DIND_SCRIPT),),
        ),
        "phoenix": Recipe(
            name="agentq-phoenix:1",
            packages=PYTHON_PACKAGES,
            python=("arize-phoenix",),
            home="/data",
            owned_dirs=("/data",),
            changes=(
                *python_user,
                "ENV PHOENIX_WORKING_DIR=/data",
                "WORKDIR /data",
                'ENTRYPOINT ["phoenix"]',
                'CMD ["serve"]',
            ),
        ),
        "prometheus": Recipe(
            name="agentq-prometheus:2",
            packages=("prometheus",),
            home="/prometheus",
            owned_dirs=("/prometheus",),
            changes=(
                f"ENV PATH={BASE_PATH}",
                f"USER {AGENTQ_UID}:{AGENTQ_UID}",
                "WORKDIR /prometheus",
                "VOLUME /prometheus",
                'ENTRYPOINT ["prometheus"]',
                f'CMD ["--config.file={PROMETHEUS_CONFIG}", "--storage.tsdb.path=/prometheus", '
                '"--web.listen-address=:9090"]',
            ),
        ),
    }


PROMETHEUS_CONFIG = "/etc/agentq/prometheus.yml"


def source_dir() -> Path:
    """The checkout agentq runs from (the wheel is built from it)."""
    root = Path(__file__).resolve().parents[2]
    if not (root / "pyproject.toml").exists():
        raise ImageBuildError(
            "agentq is not running from a source checkout; pass --source DIR (a checkout) "
            "or --source FILE.whl"
        )
    return root


@dataclass
class Built:
    name: str
    seconds: float
    size_bytes: int
    skipped: bool = False


def build_images(
    names: Sequence[str] | None = None,
    *,
    mirror: str | None = None,
    tag: str | None = None,
    source: str | None = None,
    force: bool = False,
    log: Callable[[str], None] = lambda _: None,
) -> list[Built]:
    """Build the named images (default: all); skip those that exist unless `force`."""
    wanted = list(names or recipes())
    unknown = [n for n in wanted if n not in recipes()]
    if unknown:
        raise ValueError(f"unknown image {unknown[0]!r} (known: {', '.join(recipes())})")
    if "agentq" in wanted:
        source = source or str(source_dir())
    available = recipes(tag, source or "")
    chosen = [available[n] for n in wanted]
    for tool in ("debootstrap", "docker", "chroot"):
        if shutil.which(tool) is None:
            raise ImageBuildError(f"`{tool}` is not installed (apt-get install {tool})")
    mirror = mirror or find_debian_mirror()
    built: list[Built] = []
    for recipe in chosen:
        if not force and _built_fingerprint(recipe.name) == fingerprint(recipe):
            built.append(Built(recipe.name, 0.0, _image_size(recipe.name) or 0, skipped=True))
            continue
        log(f"building {recipe.name}")
        started = time.monotonic()
        replaced = _image_id(recipe.name)
        build_one(recipe, mirror, log)
        if replaced is not None and replaced != _image_id(recipe.name):
            _remove_if_untagged(replaced)
        built.append(Built(recipe.name, time.monotonic() - started, _image_size(recipe.name) or 0))
    return built


def _inspect(name: str, template: str) -> str | None:
    """`template` (a Go template) over the image `name`; None without such an image."""
    found = subprocess.run(
        ["docker", "image", "inspect", "--format", template, name],
        capture_output=True,
        text=True,
        check=False,
    )
    return found.stdout.strip() if found.returncode == 0 else None


def _image_id(name: str) -> str | None:
    return _inspect(name, "{{.Id}}") or None


def _remove_if_untagged(image_id: str) -> None:
    """Drop the image a rebuild replaced (each rebuild of a changed checkout would leave
    one behind); one still tagged elsewhere or used by a container stays."""
    subprocess.run(["docker", "image", "rm", image_id], capture_output=True, check=False)


def build_one(recipe: Recipe, mirror: str, log: Callable[[str], None]) -> None:
    with tempfile.TemporaryDirectory(prefix="agentq-image-") as tmp:
        rootfs = Path(tmp) / "rootfs"
        include = ",".join(recipe.packages)
        run_step(
            [
                "debootstrap",
                "--variant=minbase",
                f"--include={include}",
                DEFAULT_SUITE,
                str(rootfs),
                mirror,
            ],
            step="debootstrap",
        )
        if recipe.home is not None:
            add_user(rootfs, recipe.home, recipe.owned_dirs)
        if recipe.python:
            log(f"  installing {', '.join(recipe.python)} into {VENV}")
            install_python(rootfs, recipe.python, Path(tmp) / "wheels")
        for path, content in recipe.files:
            target = rootfs / path.lstrip("/")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(content)
            target.chmod(0o755)
        trim(rootfs)
        label = f"LABEL {RECIPE_LABEL}={fingerprint(recipe)}"
        import_rootfs(rootfs, recipe.name, (*recipe.changes, label))


def add_user(rootfs: Path, home: str, owned: Sequence[str]) -> None:
    with (rootfs / "etc/passwd").open("a") as passwd:
        passwd.write(f"agentq:x:{AGENTQ_UID}:{AGENTQ_UID}::{home}:/usr/sbin/nologin\n")
    with (rootfs / "etc/group").open("a") as group:
        group.write(f"agentq:x:{AGENTQ_UID}:\n")
    for directory in {home, *owned}:
        path = rootfs / directory.lstrip("/")
        path.mkdir(parents=True, exist_ok=True)
        shutil.chown(path, AGENTQ_UID, AGENTQ_UID)


def install_python(rootfs: Path, requirements: Sequence[str], wheels: Path) -> None:
    """Wheels built on the host, installed by the rootfs's own pip (chroot).

    The rootfs's pip judges environment markers for its own Python (Debian's 3.11.2
    needs packages the host's 3.11.x may not), and fetches from PyPI only what the
    host's wheels leave out; the host's resolver and CA bundle serve it meanwhile."""
    if sys.version_info[:2] != DEBIAN_PYTHON:
        raise ImageBuildError(
            f"the host's Python is {sys.version_info[0]}.{sys.version_info[1]}; the wheels "
            f"must fit Debian {DEFAULT_SUITE}'s {DEBIAN_PYTHON[0]}.{DEBIAN_PYTHON[1]}"
        )
    run_step(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--wheel-dir",
            str(wheels),
            *requirements,
        ],
        step="pip wheel",
    )
    inside = rootfs / "tmp" / "wheels"
    shutil.copytree(wheels, inside)
    borrowed = {"etc/resolv.conf": Path("/etc/resolv.conf"), CHROOT_CA.lstrip("/"): _ca_bundle()}
    saved = {rel: (rootfs / rel).read_bytes() for rel in borrowed if (rootfs / rel).is_file()}
    try:
        for rel, host in borrowed.items():
            (rootfs / rel).unlink(missing_ok=True)
            shutil.copyfile(host, rootfs / rel)
        run_step(
            ["chroot", str(rootfs), "python3", "-m", "venv", VENV], step="venv", env=CHROOT_ENV
        )
        pip = ["chroot", str(rootfs), f"{VENV}/bin/pip"]
        run_step(
            [
                *pip,
                "install",
                "--quiet",
                "--no-cache-dir",
                "--disable-pip-version-check",
                "--cert",
                CHROOT_CA,
                "--find-links",
                "/tmp/wheels",
                *[_requirement_name(r, wheels) for r in requirements],
            ],
            step="pip install",
            env=CHROOT_ENV,
        )
        run_step(
            [*pip, "uninstall", "--yes", "--quiet", "pip"], step="pip uninstall", env=CHROOT_ENV
        )
    finally:
        for rel in borrowed:
            (rootfs / rel).unlink(missing_ok=True)
            if rel in saved:
                (rootfs / rel).write_bytes(saved[rel])
        shutil.rmtree(inside, ignore_errors=True)


def _ca_bundle() -> Path:
    import ssl

    for candidate in (ssl.get_default_verify_paths().cafile, "/etc/ssl/certs/ca-certificates.crt"):
        if candidate and Path(candidate).is_file():
            return Path(candidate)
    raise ImageBuildError("no CA bundle on the host for PyPI (install ca-certificates)")


def _requirement_name(requirement: str, wheels: Path) -> str:
    """A checkout or wheel installs as the wheel file itself (never a same-named
    project from PyPI); anything else is a PyPI requirement."""
    path = Path(requirement)
    if path.is_dir() or path.suffix == ".whl":
        project = "agentq" if path.is_dir() else path.name.split("-")[0]
        built = sorted(wheels.glob(f"{project}-*.whl"))
        if not built:
            raise ImageBuildError(f"pip wheel made no wheel of {requirement}")
        return f"/tmp/wheels/{built[-1].name}"
    return requirement


def trim(rootfs: Path) -> None:
    """Drop what a container never reads: apt's caches and lists, docs, man pages."""
    for directory in (
        "var/cache/apt/archives",
        "var/lib/apt/lists",
        "usr/share/doc",
        "usr/share/man",
        "usr/share/info",
        "usr/share/locale",
    ):
        target = rootfs / directory
        if target.is_dir():
            for entry in target.iterdir():
                if entry.is_dir() and not entry.is_symlink():
                    shutil.rmtree(entry, ignore_errors=True)
                elif entry.name != "lock":
                    entry.unlink(missing_ok=True)


def fingerprint(recipe: Recipe) -> str:
    """What an image is built from: its recipe and the content of the source it installs.

    Stored as a label on the image; an image whose label differs (the checkout changed,
    a recipe changed) is rebuilt, one that matches is reused (CI runs stay warm)."""
    digest = hashlib.sha256()
    digest.update(repr(dataclasses.replace(recipe, python=())).encode())

    for requirement in recipe.python:
        # A checkout or wheel counts by its content, wherever it lies.
        path = Path(requirement)
        if path.is_dir():
            content = source_digest(path)
        elif path.is_file():
            content = hashlib.sha256(path.read_bytes()).hexdigest()
        else:
            content = requirement
        digest.update(b"\0" + content.encode())
    return digest.hexdigest()[:16]


def source_digest(root: Path) -> str:
    """The content of what a wheel of the checkout `root` holds (package-data included;
    README.md, only the wheel's description, left out so a doc change rebuilds nothing)."""
    digest = hashlib.sha256()
    names = [root / "pyproject.toml"]
    for top in SOURCE_TREES:
        for directory, subdirs, files in os.walk(root / top, followlinks=True):
            subdirs[:] = sorted(d for d in subdirs if d != "__pycache__")
            names += [Path(directory, f) for f in sorted(files) if not f.endswith(".pyc")]
    for path in names:
        if path.is_file():
            digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def _built_fingerprint(name: str) -> str | None:
    return _inspect(name, f'{{{{index .Config.Labels "{RECIPE_LABEL}"}}}}')


def _image_size(name: str) -> int | None:
    size = _inspect(name, "{{.Size}}")
    return None if size is None else int(size)


def export_sandbox_images(directory: Path, mirror: str | None = None) -> Path:
    """Save the sandbox images (built first if missing) where docker-compose.yml's
    `engine-images` service loads them into the sandbox pool's own engine."""
    from agentq.sandbox.images import build_images as build_sandbox_images

    names = build_sandbox_images(mirror=mirror)
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / "sandbox-images.tar"
    run_step(["docker", "save", "--output", str(target), *names], step="docker save")
    return target
