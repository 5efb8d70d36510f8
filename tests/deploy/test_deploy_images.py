"""The offline image recipes agree with the Dockerfile and finish a rootfs as promised."""

from __future__ import annotations

import dataclasses
import os
import re
from pathlib import Path

import pytest

from agentq.cli.images import (
    AGENTQ_UID,
    DIND_ENTRYPOINT,
    DIND_SCRIPT,
    add_user,
    agentq_version,
    fingerprint,
    recipes,
    trim,
)
from tests.support.infra import REPO

pytestmark = pytest.mark.unit


def dockerfile_final_stage() -> str:
    text = (REPO / "Dockerfile").read_text()
    return text[text.rindex("\nFROM ") :]


def test_the_agentq_recipe_runs_like_the_dockerfile() -> None:
    recipe = recipes(source="unused")["agentq"]
    final = dockerfile_final_stage()
    assert recipe.name == f"agentq:{agentq_version()}"
    assert 'ENTRYPOINT ["agentq"]' in recipe.changes
    assert 'ENTRYPOINT ["agentq"]' in final
    assert f"USER {AGENTQ_UID}:{AGENTQ_UID}" in recipe.changes
    assert f"USER {AGENTQ_UID}:{AGENTQ_UID}" in final
    uid = re.search(r"--uid (\d+)", final)
    assert uid is not None
    assert uid[1] == str(AGENTQ_UID)
    assert any(c.startswith("ENV PATH=/opt/agentq/bin:") for c in recipe.changes)
    assert "PATH=/opt/agentq/bin:$PATH" in final


def test_every_image_name_is_distinct_and_tagged() -> None:
    names = [r.name for r in recipes(source="unused").values()]
    assert len(set(names)) == len(names)
    assert all(":" in name for name in names)


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to the image user needs root")
def test_add_user_owns_its_home_and_volumes(tmp_path: Path) -> None:
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc/passwd").write_text("root:x:0:0::/root:/bin/sh\n")
    (tmp_path / "etc/group").write_text("root:x:0:\n")
    add_user(tmp_path, "/home/agentq", ["/data"])
    assert (
        f"agentq:x:{AGENTQ_UID}:{AGENTQ_UID}::/home/agentq:"
        in (tmp_path / "etc/passwd").read_text()
    )
    for directory in ("home/agentq", "data"):
        assert (tmp_path / directory).stat().st_uid == AGENTQ_UID


def test_trim_drops_caches_and_docs_but_keeps_the_rest(tmp_path: Path) -> None:
    for rel in ("var/lib/apt/lists/x_Packages", "usr/share/doc/pkg/README", "usr/bin/tool"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("x")
    (tmp_path / "var/lib/apt/lists/lock").write_text("")
    trim(tmp_path)
    assert not (tmp_path / "var/lib/apt/lists/x_Packages").exists()
    assert (tmp_path / "var/lib/apt/lists/lock").exists()
    assert not (tmp_path / "usr/share/doc/pkg").exists()
    assert (tmp_path / "usr/bin/tool").exists()


def checkout(root: Path, body: str) -> Path:
    (root / "agentq").mkdir(parents=True)
    (root / "agentq/__init__.py").write_text(body)
    (root / "pyproject.toml").write_text("[project]\nname = 'agentq'\n")
    return root


def test_the_agentq_image_fingerprint_follows_the_checkout_content(tmp_path: Path) -> None:
    one = checkout(tmp_path / "one", "A = 1\n")
    same = checkout(tmp_path / "same", "A = 1\n")
    other = checkout(tmp_path / "other", "A = 2\n")
    (same / "agentq/__pycache__").mkdir()
    (same / "agentq/__pycache__/x.cpython-311.pyc").write_bytes(b"\0")

    def of(source: Path) -> str:
        return fingerprint(recipes(source=str(source))["agentq"])

    # Where the checkout lies and its bytecode do not count; its content does.
    assert of(one) == of(same)
    assert of(one) != of(other)


def test_a_changed_recipe_changes_its_fingerprint() -> None:
    redis = recipes(source="unused")["redis"]
    assert fingerprint(redis) == fingerprint(recipes(source="unused")["redis"])
    assert fingerprint(redis) != fingerprint(dataclasses.replace(redis, packages=("redis",)))


def test_the_engine_starts_dockerd_through_its_cgroup_script() -> None:
    dind = recipes(source="unused")["dind"]
    assert (DIND_ENTRYPOINT, DIND_SCRIPT) in dind.files
    assert f'ENTRYPOINT ["{DIND_ENTRYPOINT}"]' in dind.changes
    assert DIND_SCRIPT.rstrip().endswith('exec dockerd "$@"')
