"""The import flow's tasks: each file is parsed by a task cached on its bytes and its importer's code;
landing is one uncached task (one transaction)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prefect import task
from prefect.cache_policies import INPUTS, NO_CACHE, TASK_SOURCE, CachePolicy

from clonemem.codehash import code_hash
from clonemem.ids import stable_hash
from clonemem.importers import IMPORTERS, importer
from clonemem.importers.base import (
    ParsedPersona,
    StreamingImporter,
    check_benchmark_name,
    expand_paths,
    import_into_warehouse,
    import_stream,
    parse_each,
    read_bytes,
)
from clonemem.schemas.imports import ImportMode, ImportSummary


@dataclass
class ImporterCodePolicy(CachePolicy):
    """Adds the code of the importer named by the task's ``format_name`` input (its module's closure), so
    editing an importer parses its files again; nothing is listed, a new importer is covered at once."""

    def compute_key(
        self, task_ctx: Any, inputs: dict[str, Any], flow_parameters: dict[str, Any], **kwargs: Any
    ) -> str | None:
        found = IMPORTERS.get(inputs["format_name"])
        module = found.__module__ if isinstance(found, type) else type(found).__module__
        return stable_hash(f"{inputs['format_name']}|{code_hash(module)}")


def check_request(format_name: str, name: str) -> None:
    """Refuse an unknown format or a blank benchmark name before any file is read."""
    importer(format_name)
    check_benchmark_name(name)


@task(
    cache_policy=INPUTS + TASK_SOURCE + ImporterCodePolicy(),
    persist_result=True,
    task_run_name="parse {file_name}",
)
def parse_file(format_name: str, data: bytes, file_name: str) -> list[ParsedPersona]:
    """Every persona of one file (keyed on its bytes, so an edited file is parsed again)."""
    return importer(format_name).parse_bytes(data, file_name)


@task(
    cache_policy=INPUTS + TASK_SOURCE + ImporterCodePolicy(),
    persist_result=True,
    task_run_name="parse {file_names}",
)
def parse_group(format_name: str, data: list[bytes], file_names: list[str]) -> list[ParsedPersona]:
    """Every persona of files read together (PersonaMem's questions and contexts), keyed on their bytes."""
    return importer(format_name).parse_group(data, file_names)


def parse_files(format_name: str, paths: list[str]) -> list[ParsedPersona]:
    """Every file (or group of files read together) under the paths through :func:`parse_file` or
    :func:`parse_group`; the problems of all files in one error."""
    found = importer(format_name)
    groups = found.group(expand_paths(paths, found.suffixes))
    return parse_each(
        groups,
        lambda g: (
            parse_file(format_name, read_bytes(g[0]), str(g[0]))
            if len(g) == 1
            else parse_group(format_name, [read_bytes(f) for f in g], [str(f) for f in g])
        ),
    )


def streams(format_name: str) -> bool:
    """Whether the format's files are streamed (never held whole, so not parsed by a cached task)."""
    return importer(format_name).streams


@task(cache_policy=NO_CACHE, task_run_name="stream {name}")
def stream_files(
    warehouse_path: str,
    format_name: str,
    paths: list[str],
    name: str,
    mode: ImportMode = "create",
    wait_s: float | None = None,
) -> ImportSummary:
    """Read every file once, landing it in batches in one transaction (a streaming importer)."""
    found = importer(format_name)
    if not isinstance(found, StreamingImporter):
        raise TypeError(f"importer {format_name!r} does not stream")
    return import_stream(Path(warehouse_path), found, paths, name, mode, wait_s=wait_s)


@task(cache_policy=NO_CACHE, task_run_name="land {name}")
def land_personas(
    warehouse_path: str,
    parsed: list[ParsedPersona],
    name: str,
    mode: ImportMode = "create",
    wait_s: float | None = None,
) -> ImportSummary:
    """Write the parsed personas as one benchmark, in one transaction, from this process's writer."""
    return import_into_warehouse(Path(warehouse_path), lambda: parsed, name, mode, wait_s=wait_s)
