"""A remote-tools file for tests: the `shout` tool on the `node-tools` queue."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

SHOUT = {
    "type": "remote",
    "name": "shout",
    "description": "Upper-cases a text (served by a Node worker)",
    "input_schema": {
        "type": "object",
        "properties": {"text": {"type": "string"}},
        "required": ["text"],
    },
    "queue": "node-tools",
}


def remote_tools_file(**webhooks: dict[str, Any]) -> str:
    """A file declaring `shout` (and webhooks by queue); its path."""
    path = Path(tempfile.mkdtemp(prefix="agentq-remote-")) / "remote-tools.json"
    path.write_text(json.dumps({"tools": [SHOUT], "webhooks": webhooks}))
    return str(path)
