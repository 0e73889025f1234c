"""What a nightly `pipeline` deployment leaves a user (issue 22, "Smaller"): the release export without
being asked, the `random` control among the systems, the failure diagnosis (fail-W/R/U) in the leaderboard
artifact, and a flow log that says at least every 30 s what evaluation is building."""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from pathlib import Path

import pytest
import yaml

from clonemem import progress, settings
from clonemem.evaluation.report import leaderboard_markdown
from clonemem.evaluation.run import PersonaData, build_and_retrieve
from clonemem.memory import SYSTEMS
from clonemem.memory.base import BuildContext, MemorySystem, MemoryTrace, QuestionView, Retrieved
from clonemem.schemas.results import Diagnosis, EvaluationResult, SystemScores
from tests.memory_kit import REMOTE

ROOT = Path(__file__).parent.parent
TRACE_S = 0.04  # a slow system's time per trace


class SlowMemory(MemorySystem):
    """A system that takes its time over each trace and says how far it got, as Mem0 or A-Mem do."""

    name = "slowtest"
    llm_stages = ()

    def build(self, traces: Sequence[MemoryTrace], ctx: BuildContext) -> None:
        self.traces = list(traces)
        for i, _ in enumerate(self.traces, 1):
            time.sleep(TRACE_S)
            ctx.progress("reading", i, len(self.traces))

    def retrieve(self, question: QuestionView, k: int) -> list[Retrieved]:
        return []


# -- the deployment exports and evaluates the random control --------------------------------------------


def _deployments() -> dict[str, dict]:
    spec = yaml.safe_load((ROOT / "prefect.yaml").read_text("utf-8"))
    return {d["name"]: d for d in spec["deployments"]}


def test_pipeline_deployments_evaluate_the_random_control_and_export_beside_the_warehouse() -> None:
    from clonemem.flows.pipeline import pipeline_flow
    from clonemem.schemas.config import load_config
    from clonemem.tasks.release import export_folder

    for name in ("pipeline", "pipeline-nightly"):
        params = _deployments()[name]["parameters"]
        systems = params.get("systems") or load_config(ROOT / params["config"]).evaluation.systems
        assert "random" in systems, (name, systems)
        assert "export_dir" not in params or params["export_dir"], name  # not switched off
    # a run given no export_dir (every deployment run) exports beside its warehouse, one folder per benchmark
    default = pipeline_flow.parameters.properties["export_dir"]["default"]
    assert default == "{warehouse}.release/{name}"
    assert (
        export_folder(default, "/data/clonemem.duckdb", "demo")
        == "/data/clonemem.duckdb.release/demo"
    )
    assert (
        export_folder("/out/{name}/x{y}", "/w.duckdb", "b") == "/out/b/x{y}"
    )  # other braces kept as written


# -- the leaderboard artifact carries the failure diagnosis ---------------------------------------------


def test_leaderboard_markdown_carries_the_write_read_use_failure_shares_with_intervals() -> None:
    scores = SystemScores(
        system="bm25",
        k=5,
        n_questions=40,
        recall_flat=0.5,
        recall_flat_ci=[0.4, 0.6],
        diagnosis=Diagnosis(
            write_failure=0.125,
            read_failure=0.25,
            utilization_failure=0.2,
            correct=0.425,
            n=40,
            ci={
                "write_failure": [0.05, 0.2],
                "read_failure": [0.15, 0.35],
                "utilization_failure": None,
            },
        ),
    )
    unknown = SystemScores(
        system="plugin", k=5, n_questions=40
    )  # a system without `stored`: no diagnosis
    result = EvaluationResult(
        benchmark="b",
        benchmark_id="bid",
        eval_run_id="e",
        offline=True,
        results=[scores, unknown],
        by_question_type=[],
    )
    head, rule, row, other = leaderboard_markdown(result).splitlines()
    labels = [c.strip() for c in head.strip("|").split("|")]
    at = labels.index(
        "fail-W"
    )  # the diagnosis shares follow the metrics (the privacy columns come last)
    assert labels[at : at + 3] == ["fail-W", "fail-R", "fail-U"] and labels[at + 3 :] == [
        "viol",
        "compl",
    ]
    assert rule.count("---") == len(labels)
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[at : at + 3] == ["0.125 [0.050, 0.200]", "0.250 [0.150, 0.350]", "0.200"]
    assert [c.strip() for c in other.strip("|").split("|")][at : at + 3] == ["–", "–", "–"]


# -- a heartbeat while slow systems build ---------------------------------------------------------------


def test_a_slow_build_is_reported_while_it_runs_at_the_heartbeat_interval() -> None:
    persona = PersonaData(
        "p-id", "p1", "Ana", "en", tuple(REMOTE * 4), ()
    )  # 20 traces: 0.8 s of building
    lines: list[str] = []
    stamps: list[float] = []

    def log(line: str) -> None:
        lines.append(line)
        stamps.append(time.monotonic())

    with SYSTEMS.added("slowtest", SlowMemory), progress.heartbeat(log, 0.1, "evaluation"):
        started = time.monotonic()
        build_and_retrieve("slowtest", persona, 5, lambda name, inp: None, 0, lambda: (0, 0))
        took = time.monotonic() - started
    building = [
        m
        for m in lines
        if m.startswith("evaluation: still working: building (reading) slowtest for persona p1: ")
    ]
    assert len(building) >= 3, lines
    done = [int(re.search(r": (\d+)/20 traces", m).group(1)) for m in building]  # type: ignore[union-attr]
    assert done == sorted(done) and 0 < done[0] < 20, done  # it moves on while the build runs
    assert all(m.endswith(" s") and ", running " in m for m in building)
    # a line at least every interval (with slack for a loaded machine), none after the block
    assert (
        len(lines) >= int(took / 0.1) - 2 and max(b - a for a, b in zip(stamps, stamps[1:])) < 0.5
    )
    assert stamps[-1] <= time.monotonic()
    count = len(lines)
    time.sleep(0.25)
    assert len(lines) == count


def test_the_heartbeat_interval_is_a_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    assert settings.current().heartbeat_s == 30.0
    monkeypatch.setenv(settings.HEARTBEAT, "0.5")
    assert settings.current().heartbeat_s == 0.5
    monkeypatch.setenv(settings.HEARTBEAT, "soon")
    assert settings.current().heartbeat_s == 30.0


# -- all of it from one pipeline run, as a deployment runs it ---------------------------------------------


@pytest.mark.slow  # ~40 s; the unit tests above cover each part in the quick suite
@pytest.mark.prefect
def test_a_pipeline_run_exports_by_default_and_logs_fail_shares_and_heartbeats(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tomllib

    from clonemem.flows.pipeline import pipeline_flow
    from clonemem.schemas.config import RunConfig
    from tests.pipeline_kit import TINY, flow_run_lines_at_info, flow_run_records

    # a name of its own: nothing of it is in the task cache, so the slow system builds in this run
    name = f"ops-{tmp_path.name[-24:].lower().replace('_', '-')}"
    cfg = RunConfig.model_validate({**tomllib.loads(TINY.replace("{personas}", "1")), "name": name})
    wh = str(tmp_path / "wh.duckdb")
    monkeypatch.setenv(settings.HEARTBEAT, "0.2")
    with flow_run_lines_at_info(), SYSTEMS.added("slowtest", SlowMemory):
        state = pipeline_flow(
            wh, cfg, systems=["bm25", "random", "slowtest"], ks=[3], return_state=True
        )
    assert state.is_completed()
    result = state.result()
    folder = Path(f"{wh}.release") / name
    assert result.export is not None and Path(result.export.folder) == folder
    assert (
        sorted(p.name for p in folder.iterdir())
        == sorted(Path(f).name for f in result.export.files)
        != []
    )
    _, artifacts, logs = flow_run_records(
        state.state_details.flow_run_id, f"pipeline {name!r} done"
    )
    messages = [log.message for log in logs]
    board = next(a for a in artifacts if a.key == f"leaderboard-{name}")
    head = next(line for line in board.data.splitlines() if line.startswith("| system | k |"))
    assert head.endswith("| fail-W | fail-R | fail-U | viol | compl |"), (
        head
    )  # the privacy columns come last
    bm25 = (
        next(line for line in board.data.splitlines() if line.startswith("| bm25 | 3 |"))
        .strip("|")
        .split("|")
    )
    assert len(bm25) == len(head.strip("|").split("|"))
    assert all(
        re.fullmatch(r"\d\.\d{3} \[\d\.\d{3}, \d\.\d{3}\]", c.strip()) for c in bm25[-5:-2]
    ), bm25
    beats = [m for m in messages if m.startswith("evaluation: still working: ")]
    assert any(
        re.search(r"building \(reading\) slowtest for persona \S+: \d+/\d+ traces", m)
        for m in beats
    ), beats
