"""Remote memory systems through the command line: `clonemem evaluate --systems URL` replays the
history to the stdlib example server and to `clonemem serve-memory bm25`, both real processes on free
ports; no question sees a trace dated after it; serve-memory's bm25 scores as the in-process one; a bad
server is one line, exit 5, and nothing stored."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from clonemem.cli import app
from clonemem.importers import import_files
from clonemem.warehouse import Warehouse
from tests.protocol_kit import Faulty, faulty, free_port, serve_memory, stdlib_server

pytestmark = pytest.mark.prefect
EVAL_TABLES = (
    "eval_runs",
    "eval_retrievals",
    "eval_answers",
    "eval_question_metrics",
    "eval_metrics",
)


@pytest.fixture(scope="module")
def imported(tmp_path_factory) -> Path:
    from clonemem.demo import fixture_files
    from clonemem.expectations.gate import run_gate

    path = tmp_path_factory.mktemp("remote") / "wh.duckdb"
    with Warehouse.open_writer(path) as wh:
        import_files(wh, "release", fixture_files(), "imported")
    assert run_gate(path, "imported", docs_dir=path.parent / "docs").status == "passed"
    return path


def evaluate(wh: Path, *args: str):
    return CliRunner().invoke(app, ["--warehouse", str(wh), "evaluate", "imported", *args])


def stored_rows(wh: Path) -> dict[str, int]:
    with Warehouse.open_reader(wh) as r:
        return {t: r.rows(f"SELECT count(*) FROM {t}")[0][0] for t in EVAL_TABLES}


def queries(log: Path) -> list[dict]:
    return (
        [json.loads(line) for line in log.read_text("utf-8").splitlines()] if log.exists() else []
    )


def test_remote_systems_are_replayed_the_past_only_and_score_as_in_process(
    imported: Path, tmp_path: Path
) -> None:
    with Warehouse.open_reader(imported) as r:
        asked = dict(r.rows("SELECT external_id, question_time FROM questions"))
    logs = {"stdlib": tmp_path / "stdlib.jsonl", "served": tmp_path / "served.jsonl"}
    with (
        stdlib_server(logs["stdlib"]) as stdlib_url,
        serve_memory("bm25", logs["served"]) as served_url,
    ):
        out = tmp_path / "r.json"
        got = evaluate(
            imported,
            "--systems",
            f"bm25,{stdlib_url},{served_url}",
            "--k",
            "1,3,5",
            "--json",
            str(out),
        )
        assert got.exit_code == 0, got.output
        result = json.loads(out.read_text("utf-8"))
        for (
            name,
            log,
        ) in logs.items():  # every question asked once, each with the past and nothing later
            seen = queries(log)
            assert sorted(q["question_id"] for q in seen) == sorted(asked), name
            for q in seen:
                assert q["question_time"] == asked[q["question_id"]].isoformat()
                assert (
                    q["latest"] is None
                    or dt.datetime.fromisoformat(q["latest"]) <= asked[q["question_id"]]
                ), q
            assert [q["question_time"] for q in seen] == sorted(
                q["question_time"] for q in seen
            )  # in time order
        # a remote system is never served from the cache: a second run asks the servers again
        again = evaluate(imported, "--systems", f"bm25,{stdlib_url},{served_url}", "--k", "1,3,5")
        assert again.exit_code == 0, again.output
        assert len(queries(logs["stdlib"])) == len(queries(logs["served"])) == 2 * len(asked)
    by = {(r["system"], r["k"]): r for r in result["results"]}
    assert {s for s, _ in by} == {"bm25", "stdlib-overlap", "clonemem-bm25"}  # labelled by /v1/info
    for k in (1, 3, 5):
        assert abs(by[("clonemem-bm25", k)]["recall_flat"] - by[("bm25", k)]["recall_flat"]) <= 0.02
    # the example server lists what it holds: its write diagnosis is known
    assert by[("stdlib-overlap", 5)]["write_coverage"] == 1.0
    with Warehouse.open_reader(imported) as r:
        late = r.rows(
            "SELECT r.system, q.external_id FROM eval_retrievals r JOIN questions q USING (question_id), "
            "unnest(from_json(r.retrieved_trace_ids, '[\"VARCHAR\"]')) AS u(tid) JOIN traces t ON t.trace_id = u.tid "
            "WHERE t.event_date > q.question_time"
        )
        named = r.rows(
            "SELECT count(*) FROM eval_retrievals WHERE system = 'stdlib-overlap' AND retrieved_trace_ids <> '[]'"
        )
    assert (
        late == [] and named[0][0] > 0
    )  # warehouse ids, mapped back from the release ids the server saw


def test_a_remote_system_can_be_named_and_configured(imported: Path, tmp_path: Path) -> None:
    config = tmp_path / "remote.toml"
    with stdlib_server() as url:
        config.write_text(
            f'[evaluation]\nsystems = ["mine"]\nk = [3]\n[evaluation.remote]\nmine = "{url}"\n',
            "utf-8",
        )
        got = evaluate(imported, "--config", str(config), "--json", str(tmp_path / "a.json"))
        assert got.exit_code == 0, got.output
        got = evaluate(
            imported, "--systems", f"theirs={url}", "--k", "3", "--json", str(tmp_path / "b.json")
        )
        assert got.exit_code == 0, got.output
    got = evaluate(
        imported, "--systems", f"bm25={url}", "--k", "3"
    )  # the server has stopped: not contacted
    assert got.exit_code == 2 and "'bm25' is a registered system" in got.output, got.output
    assert {r["system"] for r in json.loads((tmp_path / "a.json").read_text())["results"]} == {
        "mine"
    }
    assert {r["system"] for r in json.loads((tmp_path / "b.json").read_text())["results"]} == {
        "theirs"
    }


def test_replay_of_every_system_scores_the_built_ins_as_built(imported: Path) -> None:
    from clonemem.flows.evaluation import evaluate_flow
    from clonemem.prefect_env import on_early_server
    from clonemem.schemas.config import RunConfig

    systems = ["oracle", "full_context", "random", "bm25"]

    def recall(replay: bool) -> dict:
        cfg = RunConfig.model_validate({"evaluation": {"replay": replay}})
        # on the server an `evaluate` of this process started, if any (as the command runs its flow),
        # rather than Prefect starting a second one
        with on_early_server():
            got = evaluate_flow(str(imported), "imported", systems, [1, 3], config=cfg)
        return {
            (r.system, r.k): (r.recall_flat, r.recall_any_any, r.write_coverage)
            for r in got.results
        }

    assert recall(True) == recall(False)


@pytest.mark.parametrize(
    ("fault", "expected"),
    [
        (None, "GET /v1/info: failed after 4 attempts in "),
        (Faulty(status_on=("/v1/ingest", 400)), "POST /v1/ingest: HTTP 400"),
        (Faulty(garbage_on="/v1/query"), "POST /v1/query: reply is not JSON"),
        (
            Faulty(drop_field="trace_ids"),
            "POST /v1/query: reply field items[0].trace_ids is missing",
        ),
    ],
    ids=["unreachable", "4xx", "malformed-json", "missing-field"],
)
def test_a_bad_server_is_one_line_exit_5_and_nothing_stored(
    imported: Path, fault: Faulty | None, expected: str
) -> None:
    before = stored_rows(imported)
    if fault is None:
        url = f"http://127.0.0.1:{free_port()}"
        got = evaluate(imported, "--systems", f"bm25,{url}", "--k", "3")
    else:
        with faulty(fault) as url:
            got = evaluate(imported, "--systems", f"bm25,{url}", "--k", "3")
    errors = [
        line for line in got.output.splitlines() if line.startswith("error:")
    ]  # besides progress lines
    assert got.exit_code == 5, got.output
    assert len(errors) == 1 and url in errors[0] and expected in errors[0], got.output
    assert stored_rows(imported) == before


@pytest.mark.slow
def test_serve_memory_bm25_scores_as_in_process_bm25_on_a_generated_benchmark(
    tmp_path: Path,
) -> None:
    """A generated benchmark (the pipeline's tiny offline config, two personas) through the real CLI:
    recall of `serve-memory bm25` through its URL within 0.02 of in-process bm25 at every k."""
    from tests.pipeline_kit import clonemem, tiny_config

    wh, home = tmp_path / "wh.duckdb", tmp_path / "prefect"
    got = clonemem(wh, home, "generate", "--config", str(tiny_config(tmp_path, personas=2)))
    assert got.returncode == 0, got.stderr
    with Warehouse.open_reader(wh) as r:
        asked = dict(r.rows("SELECT external_id, question_time FROM questions"))
    log = tmp_path / "served.jsonl"
    with serve_memory("bm25", log) as url:
        got = clonemem(
            wh,
            home,
            "evaluate",
            "tiny",
            "--systems",
            f"bm25,{url}",
            "--k",
            "5,10,20",
            "--json",
            str(tmp_path / "r.json"),
        )
    assert got.returncode == 0, got.stderr
    by = {
        (r["system"], r["k"]): r["recall_flat"]
        for r in json.loads((tmp_path / "r.json").read_text())["results"]
    }
    for k in (5, 10, 20):
        assert abs(by[("clonemem-bm25", k)] - by[("bm25", k)]) <= 0.02, by
    seen = queries(log)
    assert len(seen) == len(asked) > 10
    assert all(
        q["latest"] is None or dt.datetime.fromisoformat(q["latest"]) <= asked[q["question_id"]]
        for q in seen
    )


def test_a_stopped_remote_evaluation_resumes_without_asking_again_what_was_answered(
    tmp_path: Path,
) -> None:
    """Stopped half-way (here: the server refuses its 4th query, exit 5), the next evaluation asks the server
    only the questions it had not answered; once that one finishes, the one after asks everything again."""
    from clonemem.demo import fixture_files

    wh = tmp_path / "wh.duckdb"
    with Warehouse.open_writer(wh) as w:
        import_files(w, "release", fixture_files(), "imported")
    with Warehouse.open_reader(wh) as r:
        total = r.rows("SELECT count(*) FROM questions")[0][0]
    server = Faulty(refuse_query=4)
    with faulty(server) as url:
        first = evaluate(wh, "--systems", f"mine={url}", "--k", "3", "--force")
        assert first.exit_code == 5 and "stopped here by the test" in first.output, first.output
        answered = server.answered
        assert 0 < answered < total
        second = evaluate(
            wh,
            "--systems",
            f"mine={url}",
            "--k",
            "3",
            "--force",
            "--json",
            str(tmp_path / "b.json"),
        )
        assert second.exit_code == 0, second.output
        assert server.answered == total  # each question answered once over both runs
        third = evaluate(
            wh,
            "--systems",
            f"mine={url}",
            "--k",
            "3",
            "--force",
            "--json",
            str(tmp_path / "c.json"),
        )
        assert third.exit_code == 0, third.output
        assert server.answered == 2 * total  # a finished evaluation is not resumed: all asked again
    b, c = (json.loads((tmp_path / f).read_text()) for f in ("b.json", "c.json"))
    assert [r["recall_flat"] for r in b["results"]] == [r["recall_flat"] for r in c["results"]]
    prov = b["provenance"]["systems"][0]
    assert prov["code_hash"] is None and prov["extra"] == {
        "url": url,
        "name": "faulty",
        "version": "0",
        "protocol": "1.1",
        "features": "",
    }
