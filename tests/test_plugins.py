"""Extension by other packages: memory systems and providers found through entry points, and memory
systems named by import path. The example plugin under ``examples/`` is installed by the set-up
(`make test`), as a user would install a third-party plugin."""

from __future__ import annotations

import importlib.metadata
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from clonemem.cli import app
from clonemem.importers import import_files
from clonemem.llm.registry import PROVIDERS
from clonemem.memory import SYSTEMS
from clonemem.registry import Registry, RegistryError
from clonemem.schemas.config import RunConfig
from clonemem.warehouse import Warehouse

PLUGIN = "clonemem-example-plugin"


def test_the_example_plugin_is_installed() -> None:
    """The set-up installs it; without it the plugin tests below would prove nothing."""
    dist = importlib.metadata.distribution(PLUGIN)
    groups = {ep.group for ep in dist.entry_points}
    assert {"clonemem.memory_systems", "clonemem.providers"} <= groups


def test_entry_points_are_listed_and_resolved() -> None:
    assert "tfidf" in SYSTEMS.names()
    assert "example_offline" in PROVIDERS.names()
    cls = SYSTEMS.get("tfidf")
    assert cls.__module__ == "clonemem_example_plugin.tfidf"
    got = CliRunner().invoke(app, ["systems", "--json"])
    assert got.exit_code == 0 and "tfidf" in json.loads(got.output)


def test_import_paths_are_names_and_errors_say_what_is_wrong() -> None:
    reg: Registry[object] = Registry("thing", allow_import_paths=True)
    assert reg.get("json:dumps") is json.dumps
    assert "json:dumps" in reg and "json:loads" in reg
    with pytest.raises(RegistryError, match="no attribute 'nope'"):
        reg.get("json:nope")
    with pytest.raises(RegistryError, match="missing dependency"):
        reg.get("no_such_package_xyz.mod:Thing")
    with pytest.raises(RegistryError, match="unknown thing 'not a path'"):
        reg.get("not a path")
    plain: Registry[object] = Registry("thing")
    with pytest.raises(RegistryError, match="unknown thing"):
        plain.get("json:dumps")  # only registries that allow import paths accept them


def test_builtins_win_over_a_plugin_of_the_same_name(monkeypatch: pytest.MonkeyPatch) -> None:
    reg: Registry[object] = Registry("memory system", entry_point_group="clonemem.memory_systems")
    reg.add("tfidf", "builtin")
    assert reg.get("tfidf") == "builtin"


def test_a_plugin_provider_is_configured_and_used() -> None:
    cfg = RunConfig.model_validate(
        {
            "models": {"answerer": "example_offline/v1"},
            "providers": {"other": {"example_offline": {"max_concurrency": 2}}},
        }
    )
    assert cfg.role_settings("answerer").max_concurrency == 2
    with pytest.raises(ValueError, match="unknown provider 'nope'"):
        RunConfig.model_validate({"models": {"answerer": "nope/v1"}})


@pytest.mark.prefect
def test_plugin_systems_are_evaluated_by_name_and_by_import_path(tmp_path: Path) -> None:
    from clonemem.demo import fixture_files

    wh_path = tmp_path / "wh.duckdb"
    with Warehouse.open_writer(wh_path) as wh:
        import_files(wh, "release", fixture_files(), "imported")
    config = tmp_path / "run.toml"
    config.write_text('[models]\nanswerer = "example_offline/v1"\n', "utf-8")
    out = tmp_path / "eval.json"
    path_name = "clonemem_example_plugin.tfidf:TfidfMemory"
    got = CliRunner().invoke(
        app,
        [
            "--warehouse",
            str(wh_path),
            "evaluate",
            "imported",
            "--systems",
            f"tfidf,{path_name},random",
            "--k",
            "5",
            "--json",
            str(out),
            "--force",
            "--config",
            str(config),
        ],
    )
    assert got.exit_code == 0, got.output
    results = {r["system"]: r for r in json.loads(out.read_text("utf-8"))["results"]}
    assert set(results) == {"tfidf", path_name, "random"}
    assert results["tfidf"]["recall_flat"] == results[path_name]["recall_flat"]
    assert results["tfidf"]["n_questions"] > 0
    with Warehouse.open_reader(wh_path) as wh:
        providers = {
            p for (p,) in wh.rows("SELECT DISTINCT provider FROM llm_calls WHERE role = 'answerer'")
        }
    assert providers == {"example_offline"}
