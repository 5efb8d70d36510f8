"""Happy paths of code execution, against a real Docker engine."""

from __future__ import annotations

import base64
import json
import struct
import zlib

import pytest

from agentq.sandbox.manager import SandboxManager
from agentq.sandbox.models import ExecRequest, Language

pytestmark = pytest.mark.integration


def tiny_png() -> bytes:
    """A valid 1x1 red PNG, built here so the test needs no image library."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    pixels = zlib.compress(b"\x00\xff\x00\x00")
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")
    )


async def test_python_final_expression_is_the_value(manager: SandboxManager) -> None:
    result = await manager.execute(
        ExecRequest(language="python", code="print('working')\nx = 6 * 7\n{'answer': x}")
    )
    assert result.ok, result
    assert result.stdout == "working\n"
    assert result.value == "{'answer': 42}"
    assert result.duration_s > 0


async def test_python_top_level_await(manager: SandboxManager) -> None:
    code = (
        "import asyncio\n"
        "async def twice(x):\n    await asyncio.sleep(0.01)\n    return 2 * x\n"
        "a = await twice(4)\n"
        "await twice(a)"
    )
    result = await manager.execute(ExecRequest(language="python", code=code))
    assert result.ok, result
    assert result.value == "16"


async def test_python_without_final_expression_has_no_value(manager: SandboxManager) -> None:
    result = await manager.execute(ExecRequest(language="python", code="x = 1\nprint(x)"))
    assert result.ok, result
    assert result.value is None
    assert result.stdout == "1\n"


async def test_python_exception_and_exit_codes(manager: SandboxManager) -> None:
    failed = await manager.execute(
        ExecRequest(language="python", code="def f():\n    return 1 / 0\nf()")
    )
    assert failed.exit_code == 1
    assert failed.error is None  # the code failed, the sandbox did not
    assert "ZeroDivisionError" in failed.stderr
    assert 'File "<cell 1>", line 2, in f' in failed.stderr
    exited = await manager.execute(ExecRequest(language="python", code="import sys\nsys.exit(3)"))
    assert exited.exit_code == 3
    syntax = await manager.execute(ExecRequest(language="python", code="def ("))
    assert syntax.exit_code == 1
    assert "SyntaxError" in syntax.stderr


async def test_javascript_stdout_stderr_and_exit_code(manager: SandboxManager) -> None:
    result = await manager.execute(
        ExecRequest(
            language="javascript",
            code="console.log('hello', [1, 2].map((x) => x * 2));\nconsole.error('warn');",
        )
    )
    assert result.ok, result
    assert result.stdout == "hello [ 2, 4 ]\n"
    assert result.stderr == "warn\n"
    exited = await manager.execute(ExecRequest(language="javascript", code="process.exit(4)"))
    assert exited.exit_code == 4
    thrown = await manager.execute(ExecRequest(language="javascript", code="throw new Error('x')"))
    assert thrown.exit_code == 1
    assert "Error: x" in thrown.stderr


async def test_javascript_esm_and_async(manager: SandboxManager) -> None:
    code = "import { readFileSync } from 'fs';\nawait Promise.resolve();\nconsole.log('esm ok');"
    result = await manager.execute(ExecRequest(language="javascript", code=code))
    assert result.ok, result
    assert result.stdout == "esm ok\n"


async def test_files_in_are_readable_and_importable(manager: SandboxManager) -> None:
    files = {
        "data/input.csv": "a,b\n1,2\n3,4\n",
        "helpers.py": "def total(rows):\n    return sum(rows)\n",
    }
    code = (
        "import csv, helpers\n"
        "rows = list(csv.DictReader(open('data/input.csv')))\n"
        "helpers.total(int(r['b']) for r in rows)"
    )
    result = await manager.execute(ExecRequest(language="python", code=code, files=files))
    assert result.ok, result
    assert result.value == "6"
    js = await manager.execute(
        ExecRequest(
            language="javascript",
            code="const h = require('./lib/h');\nconsole.log(h.twice(21));",
            files={"lib/h.js": "exports.twice = (x) => x * 2;"},
        )
    )
    assert js.ok, js
    assert js.stdout == "42\n"


async def test_artifacts_out_including_an_image(manager: SandboxManager) -> None:
    png = tiny_png()
    code = (
        "import base64, json, os\n"
        "os.makedirs('out/charts', exist_ok=True)\n"
        f"open('out/charts/red.png', 'wb').write(base64.b64decode({base64.b64encode(png)!r}))\n"
        "json.dump({'rows': 2}, open('out/summary.json', 'w'))\n"
        "open('out/blob.bin', 'wb').write(bytes(range(256)))\n"
        "open('not-an-artifact.txt', 'w').write('outside out/')\n"
    )
    result = await manager.execute(ExecRequest(language="python", code=code))
    assert result.ok, result
    by_path = {artifact.path: artifact for artifact in result.artifacts}
    assert sorted(by_path) == ["blob.bin", "charts/red.png", "summary.json"]
    image = by_path["charts/red.png"]
    assert image.is_image
    assert image.media_type == "image/png"
    assert base64.b64decode(image.data_base64 or "") == png
    assert image.size == len(png)
    summary = by_path["summary.json"]
    assert summary.media_type == "application/json"
    assert json.loads(summary.text or "") == {"rows": 2}
    blob = by_path["blob.bin"]
    assert not blob.is_image
    assert blob.text is None
    assert base64.b64decode(blob.data_base64 or "") == bytes(range(256))


async def test_javascript_artifacts(manager: SandboxManager) -> None:
    png = base64.b64encode(tiny_png()).decode()
    code = (
        "const fs = require('fs');\n"
        "fs.mkdirSync('out', { recursive: true });\n"
        f"fs.writeFileSync('out/dot.png', Buffer.from('{png}', 'base64'));\n"
        "fs.writeFileSync('out/notes.txt', 'héllo');\n"
    )
    result = await manager.execute(ExecRequest(language="javascript", code=code))
    assert result.ok, result
    by_path = {artifact.path: artifact for artifact in result.artifacts}
    assert by_path["dot.png"].is_image
    assert by_path["dot.png"].media_type == "image/png"
    assert by_path["notes.txt"].text == "héllo"


async def test_artifact_limits(manager: SandboxManager) -> None:
    code = (
        "import os\nos.makedirs('out', exist_ok=True)\n"
        "open('out/big.txt', 'w').write('x' * 5000)\n"
        "for i in range(4):\n    open(f'out/small{i}.txt', 'w').write('y')\n"
    )
    request = ExecRequest(
        language="python",
        code=code,
        limits={"artifact_bytes": 1000, "max_artifacts": 2},
    )
    result = await manager.execute(request)
    assert result.ok, result
    assert [artifact.path for artifact in result.artifacts] == ["small0.txt", "small1.txt"]
    notices = " ".join(result.notices)
    assert "out/big.txt: 5000 bytes exceeds the 1000-byte artifact limit" in notices
    assert "more than 2 artifacts" in notices


async def test_run_session_keeps_variables_and_files(manager: SandboxManager) -> None:
    first = await manager.execute(
        ExecRequest(
            language="python",
            code="import os\ncounter = 1\nopen('state.txt', 'w').write('kept')\nos.getpid()",
        ),
        session_key="run-1",
    )
    assert first.ok, first
    second = await manager.execute(
        ExecRequest(
            language="python",
            code="import os\ncounter += 1\n(counter, open('state.txt').read(), os.getpid())",
        ),
        session_key="run-1",
    )
    assert second.ok, second
    assert second.value == f"(2, 'kept', {first.value})"
    # Another session does not see it.
    other = await manager.execute(
        ExecRequest(language="python", code="'counter' in globals()"), session_key="run-2"
    )
    assert other.value == "False"
    await manager.close_session("run-1")
    await manager.close_session("run-2")
    fresh = await manager.execute(
        ExecRequest(language="python", code="'counter' in globals()"), session_key="run-1"
    )
    assert fresh.value == "False"
    await manager.close_session("run-1")


async def test_run_session_artifacts_are_reported_once(manager: SandboxManager) -> None:
    write = "import os\nos.makedirs('out', exist_ok=True)\nopen('out/a.txt', 'w').write(TEXT)\n"
    first = await manager.execute(
        ExecRequest(language="python", code=write.replace("TEXT", "'v1'")), session_key="s"
    )
    assert [a.path for a in first.artifacts] == ["a.txt"]
    unchanged = await manager.execute(ExecRequest(language="python", code="1"), session_key="s")
    assert unchanged.artifacts == []
    changed = await manager.execute(
        ExecRequest(language="python", code=write.replace("TEXT", "'v2, longer'")),
        session_key="s",
    )
    assert [a.text for a in changed.artifacts] == ["v2, longer"]
    await manager.close_session("s")


async def test_run_session_survives_errors_but_not_kills(manager: SandboxManager) -> None:
    await manager.execute(ExecRequest(language="python", code="x = 5"), session_key="k")
    failed = await manager.execute(ExecRequest(language="python", code="1/0"), session_key="k")
    assert failed.exit_code == 1
    kept = await manager.execute(ExecRequest(language="python", code="x"), session_key="k")
    assert kept.value == "5"
    killed = await manager.execute(
        ExecRequest(language="python", code="while True: pass", limits={"timeout_s": 1}),
        session_key="k",
    )
    assert killed.timed_out
    assert killed.error is not None
    assert "state was lost" in killed.error
    fresh = await manager.execute(
        ExecRequest(language="python", code="'x' in globals()"), session_key="k"
    )
    assert fresh.value == "False"
    await manager.close_session("k")


@pytest.mark.parametrize(
    ("language", "make_dir"),
    [
        ("python", "import os\nos.makedirs('clash/x')"),
        ("javascript", "require('fs').mkdirSync('clash/x', {recursive: true})"),
    ],
)
async def test_input_file_clashing_with_a_directory_is_a_plain_error(
    manager: SandboxManager, language: Language, make_dir: str
) -> None:
    first = await manager.execute(
        ExecRequest(language=language, code=make_dir), session_key="clash"
    )
    assert first.ok, first
    clash = await manager.execute(
        ExecRequest(language=language, code="1", files={"clash": "text"}), session_key="clash"
    )
    assert clash.exit_code == 1
    assert clash.error is None
    assert "cannot write the input files" in clash.stderr
    after = await manager.execute(ExecRequest(language=language, code="1"), session_key="clash")
    assert after.ok, after  # the session's container survived
    await manager.close_session("clash")
