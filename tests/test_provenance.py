"""Every evaluation records where its numbers came from (code, models, packages, git commit,
aggregation): in the warehouse, in `evaluate --json`, and on the dashboard's leaderboard, which says
when two evaluations differ. Two evaluations of mem0 that differ only in the extractor model (or in
mem0's code) can be told apart."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from clonemem.evaluation import provenance
from clonemem.schemas.config import RunConfig
from clonemem.schemas.results import EvaluationResult, Provenance
from tests.dashboard_kit import app, sql, texts


@pytest.fixture(scope="module")
def two_evaluations(tmp_path_factory) -> tuple[Path, dict, dict]:
    """The demo release (imported in this process: no flow) evaluated with mem0 twice through the CLI, in
    this process (one Prefect home, so the second run may use the first one's cache): the default
    extractor, then another extractor model with the paper's aggregation (the CLI options)."""
    from clonemem.demo import fixture_files
    from clonemem.importers import import_files
    from clonemem.warehouse import Warehouse
    from tests import shared_kit

    folder = tmp_path_factory.mktemp("provenance")
    wh = folder / "wh.duckdb"

    def cli(*args: str) -> None:
        got = shared_kit.cli(wh, *args)
        assert got.exit_code == 0, got.stdout + got.stderr

    with Warehouse.open_writer(wh) as writer:
        import_files(writer, "release", fixture_files()[:1], "demo")
    other = folder / "other.toml"
    other.write_text('[models]\nextractor = "offline/extractor-b"\n')
    cli(
        "evaluate",
        "demo",
        "--systems",
        "mem0,bm25",
        "--k",
        "3",
        "--force",
        "--json",
        str(folder / "a.json"),
    )
    cli(
        "evaluate",
        "demo",
        "--systems",
        "mem0,bm25",
        "--k",
        "3",
        "--force",
        "--config",
        str(other),
        "--aggregate",
        "personas",
        "--exclude-no-evidence",
        "--json",
        str(folder / "b.json"),
    )
    return (
        wh,
        json.loads((folder / "a.json").read_text()),
        json.loads((folder / "b.json").read_text()),
    )


@pytest.mark.prefect
def test_provenance_lands_in_the_warehouse_and_the_json(two_evaluations) -> None:
    wh, a, b = two_evaluations
    pa, pb = (EvaluationResult.model_validate(doc).provenance for doc in (a, b))
    assert pa is not None and pb is not None
    # the JSON: per system, its code hash and its stages' models; the run's models, packages, commit
    assert pa.system("mem0").llm_stages == {
        "memory.mem0_extract": "offline/extractor",
        "memory.mem0_update": "offline/extractor",
    }
    assert pb.system("mem0").llm_stages == {
        "memory.mem0_extract": "offline/extractor-b",
        "memory.mem0_update": "offline/extractor-b",
    }
    assert (
        pa.system("bm25").llm_stages == {}
        and pa.system("bm25").code_hash == pb.system("bm25").code_hash
    )
    assert pa.answerer == "offline/answerer" and pa.judge == "offline/judge"
    assert (
        pa.packages["duckdb"]
        and pa.packages["prefect"]
        and set(pa.packages) == set(provenance.KEY_PACKAGES)
    )
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=Path(__file__).parent
    ).stdout.strip()
    assert pa.git_commit == head and pa.project_version
    assert (pa.aggregation.aggregate, pa.aggregation.exclude_no_evidence) == ("questions", False)
    assert (pb.aggregation.aggregate, pb.aggregation.exclude_no_evidence) == ("personas", True)
    assert pa.differences(pb) == [
        "aggregation: questions → personas, no-evidence left out",
        "mem0 memory.mem0_extract: offline/extractor → offline/extractor-b",
        "mem0 memory.mem0_update: offline/extractor → offline/extractor-b",
    ]

    # the warehouse holds the same provenance, and the aggregation in the run's config
    stored = sql(
        wh,
        "SELECT eval_run_id, provenance_json::VARCHAR AS p, config_json::VARCHAR AS c FROM eval_runs "
        "ORDER BY started_at",
    )
    assert [Provenance.model_validate_json(p) for p in stored["p"]] == [pa, pb]
    assert [json.loads(c)["aggregation"] for c in stored["c"]] == [
        {"aggregate": "questions", "exclude_no_evidence": False},
        {"aggregate": "personas", "exclude_no_evidence": True},
    ]
    # the other extractor really ran: mem0's retrievals were not served from the first run's cache
    assert sql(wh, "SELECT count(*) AS n FROM llm_calls WHERE model = 'extractor-b'")["n"][0] > 0


@pytest.mark.prefect
def test_leaderboard_shows_provenance_and_says_when_two_evaluations_differ(
    two_evaluations, monkeypatch
) -> None:
    wh, a, b = two_evaluations
    monkeypatch.setenv("CLONEMEM_WAREHOUSE", str(wh))
    at = app("Leaderboard", benchmark="demo")
    assert at.selectbox(key="lb_eval").value == b["eval_run_id"]  # newest first
    shown = {
        r["system"]: r
        for r in next(df.value for df in at.dataframe if "code_hash" in df.value.columns).to_dict(
            "records"
        )
    }
    pb = EvaluationResult.model_validate(b).provenance
    assert shown["mem0"]["code_hash"] == pb.system("mem0").code_hash
    assert shown["mem0"]["stage_models"] == (
        "memory.mem0_extract=offline/extractor-b, memory.mem0_update=offline/extractor-b"
    )
    page = texts(at)
    assert f"commit {pb.git_commit[:12]}" in page and "duckdb " + pb.packages["duckdb"] in page
    assert "mean of persona means" in page
    assert at.selectbox(key="lb_other").value == a["eval_run_id"]
    warning = " ".join(w.value for w in at.warning)
    assert "differ in provenance" in warning
    assert "mem0 memory.mem0_extract: offline/extractor-b → offline/extractor" in warning


def test_a_code_change_changes_the_system_code_hash(tmp_path: Path, monkeypatch) -> None:
    """Two versions of one system's module give two code hashes, and the provenance says which."""
    from clonemem import codehash
    from clonemem.memory import SYSTEMS

    pkg = tmp_path / "provsys"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    module = pkg / "mod.py"
    source = (
        "from clonemem.memory.simple import RandomControl\n\n"
        "class Sys(RandomControl):\n    name = 'provsys'\n    provenance_extra = {'url': 'http://127.0.0.1:1/v1', 'version': '%s'}\n"
    )
    module.write_text(source % "1")
    monkeypatch.syspath_prepend(str(tmp_path))
    first = provenance.system_provenance("provsys.mod:Sys", RunConfig())
    assert first.extra == {"url": "http://127.0.0.1:1/v1", "version": "1"}
    module.write_text(source % "2" + "# edited\n")
    codehash._code_hash.cache_clear()
    codehash.closure.cache_clear()
    SYSTEMS.remove("provsys.mod:Sys", missing_ok=True)
    import importlib
    import sys

    sys.modules.pop("provsys.mod", None)
    importlib.invalidate_caches()
    second = provenance.system_provenance("provsys.mod:Sys", RunConfig())
    assert first.code_hash != second.code_hash
    p1 = Provenance(answerer="a/x", judge="a/y", systems=[first])
    p2 = Provenance(answerer="a/x", judge="a/y", systems=[second])
    assert p1.differences(p2) == [
        f"provsys.mod:Sys code: {first.code_hash} → {second.code_hash}",
        "provsys.mod:Sys version: 1 → 2",
    ]


def test_no_git_means_no_commit_not_a_failure(monkeypatch) -> None:
    provenance.git_state.cache_clear()
    monkeypatch.setattr(provenance.shutil, "which", lambda name: None)
    try:
        prov = provenance.collect(["bm25"], RunConfig())
    finally:
        provenance.git_state.cache_clear()
    assert prov.git_commit is None and prov.git_dirty is None
    assert prov.system("bm25").code_hash


def test_a_copy_outside_any_checkout_has_no_commit(tmp_path: Path, monkeypatch) -> None:
    """An installed copy (here: the package's __init__ seen from a folder git does not track) has no commit."""
    import clonemem

    fake = tmp_path / "site-packages" / "clonemem"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    provenance.git_state.cache_clear()
    monkeypatch.setattr(clonemem, "__file__", str(fake / "__init__.py"))
    try:
        assert provenance.git_state() == (None, None)
    finally:
        provenance.git_state.cache_clear()


@pytest.mark.prefect
def test_leaderboard_artifact_lists_the_provenance(two_evaluations) -> None:
    """The leaderboard artifact a flow run leaves in Prefect carries the evaluation's provenance."""
    from prefect import flow
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter

    from clonemem.prefect_env import on_early_server
    from clonemem.tasks.reporting import publish_leaderboard

    _wh, _a, b = two_evaluations
    result = EvaluationResult.model_validate(b)

    @flow(name="provenance-artifact")
    def publish() -> None:
        publish_leaderboard(result)

    # on the Prefect server the CLI started in this process, if it did (rather than a second one)
    with on_early_server():
        state = publish(return_state=True)
        with get_client(sync_client=True) as client:
            artifacts = client.read_artifacts(
                flow_run_filter=FlowRunFilter(id={"any_": [state.state_details.flow_run_id]})
            )  # type: ignore[arg-type]
    board = next(a for a in artifacts if a.key == "leaderboard-demo")
    mem0 = result.provenance.system("mem0")
    assert (
        "## Provenance" in board.data
        and f"commit `{result.provenance.git_commit[:12]}`" in board.data
    )
    assert f"| mem0 | `{mem0.code_hash}` | memory.mem0_extract: `offline/extractor-b`" in board.data
    assert (
        "aggregation: mean of persona means; recall leaves out questions without evidence"
        in board.data
    )
