"""Deterministic ids: uuid5 of a content path, so re-runs and re-imports produce the same keys."""

from __future__ import annotations

import hashlib
import uuid

# Fixed namespace for every id this project derives; changing it would re-key every warehouse.
NAMESPACE = uuid.UUID("6f1c5a8e-3b7d-5e2a-9c41-0d8e7f6a5b34")


def content_id(*path: str | int) -> str:
    """uuid5 of a '/'-joined content path, e.g. content_id("benchmark", name, "persona", pid)."""
    return str(uuid.uuid5(NAMESPACE, "/".join(str(p) for p in path)))


def stable_hash(text: str, length: int = 16) -> str:
    """Short sha256 hex digest, for prompt hashes and cache keys."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:length]


def stable_int(*parts: str | int) -> int:
    """A 64-bit integer derived from parts; used to seed per-item random generators."""
    digest = hashlib.sha256("\x1f".join(str(p) for p in parts).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big")


def benchmark_id(name: str) -> str:
    """A benchmark's id: derived from its name, so a re-import or re-generation keys the same rows."""
    return content_id("benchmark", name)


def persona_id(benchmark_name: str, person_key: str, language: str | None = None) -> str:
    """A persona's id within a benchmark; a language (the en and zh files of one person) keys its own persona."""
    if language is None:
        return content_id("benchmark", benchmark_name, "persona", person_key)
    return content_id("benchmark", benchmark_name, "persona", person_key, "language", language)
