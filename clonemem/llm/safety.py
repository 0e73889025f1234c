"""Guards that keep tests from spending money and keys out of every message."""

from __future__ import annotations

import ipaddress
from urllib.parse import urlparse

from clonemem import settings

DISABLE_ENV = settings.DISABLE_LIVE_LLM


def live_disabled() -> bool:
    return settings.current().live_llm_disabled


def is_loopback_url(url: str | None) -> bool:
    """True for http(s) URLs whose host is localhost or a loopback address."""
    if not url:
        return False
    host = urlparse(url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def redact(text: str, *secrets: str | None) -> str:
    """Replace every occurrence of a secret (and its common prefix) with a marker."""
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, "***")
    return text
