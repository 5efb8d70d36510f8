"""Which hosts a spec may make a worker connect to (HTTP tools, webhooks): the pure part.

The deployment lists host patterns (`AGENTQ_ALLOW_HTTP_HOSTS`,
`AGENTQ_ALLOW_WEBHOOK_HOSTS`): an exact name or address, `*.example.com` for its
subdomains, or `*` for any public host. A host that resolves to a loopback, private,
link-local (cloud metadata) or otherwise non-public address is reached only when it is
listed by its exact name: a wildcard never opens the inside of the network. The
addresses are checked by the worker after DNS resolution and pinned for the connection
(`agentq.workers.tools.egress`); here are the checks a submitter can make without DNS.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import SplitResult, urlsplit

from agentq.orchestrator.core.errors import SpecError

# Whitespace, backslashes and control characters: urlsplit would drop or keep them quietly.
UNSAFE_CHARS = re.compile(r"[\s\\\x00-\x1f\x7f]")
SCHEMES = ("http", "https")


@dataclass(frozen=True)
class HostAllowList:
    """The hosts one setting allows."""

    setting: str  # the variable it came from, for messages
    patterns: frozenset[str]

    @classmethod
    def parse(cls, raw: str, setting: str) -> HostAllowList:
        patterns = frozenset(p.strip().lower().rstrip(".") for p in raw.split(",") if p.strip())
        return cls(setting, patterns)

    def allows(self, host: str) -> bool:
        host = host.lower().rstrip(".")
        if "*" in self.patterns or host in self.patterns:
            return True
        return any(
            p.startswith("*.") and host.endswith(p[1:]) and host != p[2:] for p in self.patterns
        )

    def names(self, host: str) -> bool:
        """Listed by its exact name: then it may be a non-public address."""
        return host.lower().rstrip(".") in self.patterns

    def refusal(self, host: str) -> str:
        if not self.patterns:
            return f"this deployment allows no hosts here ({self.setting} is empty)"
        return f"host {host!r} is not allowed by this deployment ({self.setting})"


def split_url(url: str, where: str) -> SplitResult:
    """An http(s) URL with a host and no credentials, or a SpecError naming `where`."""
    if UNSAFE_CHARS.search(url):
        raise SpecError(f"{where}: holds whitespace or control characters")
    parts = urlsplit(url)
    if parts.scheme not in SCHEMES:
        raise SpecError(f"{where}: must be an http:// or https:// URL")
    if parts.username is not None or parts.password is not None:
        raise SpecError(f"{where}: may not hold credentials")
    if not parts.hostname:
        raise SpecError(f"{where}: has no host")
    try:
        _ = parts.port
    except ValueError:
        raise SpecError(f"{where}: has an invalid port") from None
    return parts


def check_spec_host(url: str, allow: HostAllowList, where: str) -> str:
    """The URL's host, when the deployment allows it (before DNS); else a SpecError."""
    host = split_url(url, where).hostname or ""
    if not allow.allows(host):
        raise SpecError(f"{where}: {allow.refusal(host)}")
    return host
