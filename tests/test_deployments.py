"""prefect.yaml declares deployments whose entrypoints exist, with an evaluation on a cron schedule."""

from __future__ import annotations

import importlib
from pathlib import Path

import yaml

ROOT = Path(__file__).parent.parent


def test_entrypoints_resolve_and_evaluation_is_scheduled() -> None:
    spec = yaml.safe_load((ROOT / "prefect.yaml").read_text("utf-8"))
    names = set()
    for dep in spec["deployments"]:
        path, func = dep["entrypoint"].split(":")
        assert (ROOT / path).is_file(), path
        # the folder is mapped into the clonemem namespace (pyproject.toml)
        module = importlib.import_module("clonemem." + path.removesuffix(".py").replace("/", "."))
        flow = getattr(module, func)
        assert hasattr(flow, "fn"), f"{dep['entrypoint']} is not a Prefect flow"
        assert set(dep.get("parameters", {})) <= set(flow.parameters.properties), dep["name"]
        names.add(dep["name"])
    assert {"pipeline", "pipeline-nightly", "generate", "gate", "evaluate-nightly"} <= names
    nightly = next(d for d in spec["deployments"] if d["name"] == "evaluate-nightly")
    assert nightly["schedules"][0]["cron"]
