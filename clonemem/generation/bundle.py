"""Persona bundles: one generated persona's rows, written where a worker can leave them for the
machine that owns the warehouse (`clonemem land`, or the orchestrating run of
``generate_distributed_flow``), which lands them through the landing protocol.

A bundle's address is any fsspec URL: a local path, ``file://``, ``s3://`` or ``gs://`` (with s3fs or
gcsfs installed where it is read and written), ``memory://`` (one process only, for tests). A bundle
appears whole or not at all: a local file is written under a temporary name and renamed; object
stores publish an object only when its upload completes.

Format (JSON, one object): ``format`` (1), ``benchmark`` (the benchmark row), ``persona_key``,
``persona_id`` (null when stage I failed), ``tables`` (table -> rows), ``content_hash`` (of the rows
before serialisation; checked when read), ``failures`` (stage, item, error), ``dropped``, ``calls``
(the LLM calls the content paid for, cached ones included) and ``run_id`` (the run that wrote it:
calls with another run id were served from the cache). Bundles written before ``format`` existed
(no key, hash, drops or run id) are still read.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

import fsspec
from fsspec.implementations.local import LocalFileSystem

from clonemem.generation.assemble import Assembly
from clonemem.generation.benchmark import benchmark_row
from clonemem.generation.dag import PersonaDag
from clonemem.llm.types import CallRecord
from clonemem.schemas.config import RunConfig
from clonemem.schemas.results import PersonaBundleResult, StageFailure
from clonemem.warehouse.landing import rows_hash

FORMAT = 1


class BundleError(ValueError):
    """A bundle that cannot be read, or whose rows do not match the hash it was written with."""


@dataclass(frozen=True)
class PersonaBundle:
    """A bundle as read back: what landing and the generation summary need."""

    url: str
    benchmark: Mapping[str, Any]
    persona_key: str | None
    persona_id: str | None
    tables: dict[str, list[dict[str, Any]]]
    content_hash: str | None
    failures: tuple[StageFailure, ...]
    dropped: tuple[str, ...]
    calls: tuple[CallRecord, ...]
    run_id: str | None

    @property
    def benchmark_id(self) -> str:
        return self.benchmark["benchmark_id"]

    def new_calls(self) -> int:
        """Calls made by the run that wrote the bundle (not those a cached result carried)."""
        return sum(1 for c in self.calls if self.run_id is not None and c.run_id == self.run_id)


def join(location: str, *parts: str) -> str:
    """``location/part/...`` for a local folder or any fsspec URL."""
    return "/".join([location.rstrip("/"), *(p.strip("/") for p in parts)])


def write_bundle(
    url: str,
    config: RunConfig,
    dag: PersonaDag,
    assembly: Assembly | None,
    run_id: str | None = None,
) -> PersonaBundleResult:
    """Write one generated persona to ``url`` (any fsspec URL), whole or not at all."""
    bundle = {
        "format": FORMAT,
        "benchmark": benchmark_row(config),
        "persona_key": dag.key,
        "persona_id": assembly.rows.persona_id if assembly else None,
        "tables": assembly.rows.tables if assembly else {},
        "content_hash": assembly.content_hash if assembly else None,
        "failures": [asdict(f) for f in dag.failures],
        "dropped": list(assembly.dropped) if assembly else [],
        "calls": [c.row() for c in dag.calls],
        "run_id": run_id,
    }
    _write_text(url, json.dumps(bundle, ensure_ascii=False, default=str))
    return PersonaBundleResult(
        persona_id=bundle["persona_id"], bundle=url, failures=len(dag.failures)
    )


def _write_text(url: str, text: str) -> None:
    fs, path = fsspec.core.url_to_fs(url)
    parent = path.rsplit("/", 1)[0] if "/" in path else ""
    if parent:
        fs.makedirs(parent, exist_ok=True)
    if isinstance(fs, LocalFileSystem):
        tmp = f"{path}.{uuid.uuid4().hex}.tmp"
        try:
            with fs.open(tmp, "w", encoding="utf-8") as fh:
                fh.write(text)
            fs.mv(tmp, path)  # a rename: readers see the old file or the new one, never half of one
        finally:
            if fs.exists(tmp):
                fs.rm(tmp)
    else:
        with fs.open(path, "w", encoding="utf-8") as fh:
            fh.write(text)


def _call(row: Mapping[str, Any]) -> CallRecord:
    started = row["started_at"]
    return CallRecord(
        **{
            **row,
            "started_at": dt.datetime.fromisoformat(started)
            if isinstance(started, str)
            else started,
        }
    )


def read_bundle(url: str) -> PersonaBundle:
    """Read and check a bundle; :class:`BundleError` names the URL and the problem."""
    try:
        with fsspec.open(url, "r", encoding="utf-8") as fh:
            data = json.load(fh)
        tables, pid = data["tables"], data["persona_id"]
        bundle = PersonaBundle(
            url=url,
            benchmark=data["benchmark"],
            persona_key=data.get("persona_key"),
            persona_id=pid,
            tables=tables,
            content_hash=data.get("content_hash"),
            failures=tuple(
                StageFailure(
                    persona=data.get("persona_key") or str(pid),
                    stage=f["stage"],
                    item=f["item"],
                    error=f["error"],
                )
                for f in data.get("failures", [])
            ),
            dropped=tuple(data.get("dropped", [])),
            calls=tuple(_call(c) for c in data.get("calls", [])),
            run_id=data.get("run_id"),
        )
        bundle.benchmark["benchmark_id"]
    except FileNotFoundError:
        raise BundleError(f"{url}: no such bundle") from None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise BundleError(f"{url}: not a persona bundle ({type(exc).__name__}: {exc})") from None
    if bundle.content_hash is not None and rows_hash(tables) != bundle.content_hash:
        raise BundleError(
            f"{url}: the rows do not match the bundle's content hash (damaged or edited)"
        )
    return bundle
