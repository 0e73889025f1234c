"""Reading the command line's option values: lists, depths, configs, output files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel

from clonemem.cli.exit import usage
from clonemem.cli.render import err

if TYPE_CHECKING:
    from clonemem.schemas.config import RunConfig
    from clonemem.schemas.imports import ImportMode


def csv(value: str, what: str) -> list[str]:
    """A comma-separated list, blanks dropped; an empty list is a usage error naming the flag."""
    items = [v.strip() for v in value.split(",") if v.strip()]
    if not items:
        usage(f"{what} must not be empty")
    return items


def name(value: str | None, flag: str) -> str:
    """A name given with ``flag`` (``--name``), checked as every name is (``clonemem.schemas.names``):
    a blank one is a usage error naming the flag."""
    from clonemem.schemas.names import NameRefused, checked_name

    try:
        return checked_name(value, flag)
    except NameRefused as exc:
        usage(str(exc))


def system_names(value: str, flag: str = "--systems") -> list[str]:
    """`--systems a,b,LABEL=URL`: each item a name, each remote label too; an empty item is refused."""
    from clonemem.schemas.names import NameRefused, split_names

    try:
        return split_names(value, flag)
    except NameRefused as exc:
        usage(str(exc))


def ks(value: str) -> list[int]:
    """`--k 5,10`: sorted distinct depths, each at least 1."""
    try:
        depths = sorted({int(x) for x in csv(value, "--k")})
    except ValueError:
        usage(f"--k must be comma-separated integers, got {value!r}")
    if any(x < 1 for x in depths):
        usage("--k values must be at least 1")
    return depths


def config_for_run(
    path: Path, max_cost: float | None, allow_empty: bool = False, check_keys: bool = True
) -> RunConfig:
    """The run config, with `--max-cost` over its `max_cost_usd`."""
    from clonemem.schemas.config import load_config

    cfg = load_config(path, allow_empty=allow_empty, check_keys=check_keys)
    if max_cost is not None:
        if max_cost <= 0:
            usage("--max-cost must be more than 0")
        cfg = cfg.model_copy(update={"max_cost_usd": max_cost})
    return cfg


def with_aggregation(
    cfg: RunConfig, aggregate: str | None, exclude_no_evidence: bool | None
) -> RunConfig:
    """The config with the command line's aggregation options over its [evaluation] ones."""
    if aggregate is not None and aggregate not in ("questions", "personas"):
        usage(f"--aggregate must be 'questions' or 'personas', got {aggregate!r}")
    update = {
        k: v
        for k, v in (("aggregate", aggregate), ("exclude_no_evidence", exclude_no_evidence))
        if v is not None
    }
    if not update:
        return cfg
    return cfg.model_copy(update={"evaluation": cfg.evaluation.model_copy(update=update)})


def import_mode(replace: bool, append: bool) -> ImportMode:
    if replace and append:
        usage("--replace and --append exclude each other")
    return "replace" if replace else "append" if append else "create"


def write_json(path: Path, result: BaseModel) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result.model_dump(mode="json"), indent=1), "utf-8")
    err(f"results written to {path}")
