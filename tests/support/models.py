"""Model endpoints for tests: a models file, and the allow-lists a test may set."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

# The fakes listen on 127.0.0.1; a test that puts their URL in a spec allows it so.
LOOPBACK_SPEC_SETTINGS = {
    "AGENTQ_ALLOW_SPEC_ENDPOINTS": "http://127.0.0.1:",
    "AGENTQ_ALLOW_SPEC_KEY_ENVS": "OPENAI_API_KEY",
}


def write_models_file(path: Path, **endpoints: dict[str, Any]) -> str:
    """A models file declaring `endpoints` (name -> provider, base_url, …); its path."""
    path.write_text(json.dumps({"endpoints": endpoints}))
    return str(path)
