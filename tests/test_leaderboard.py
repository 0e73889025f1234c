"""A benchmark's leaderboard across evaluations, end to end through the command line (issue 30).

The built-ins evaluated first, a remote system evaluated alone (then pointed at a newer server version),
a results file scored under a name and a quick run: `clonemem leaderboard` puts the first three in one
table with their mode, evaluation and provenance, the quick run apart with the reason; the row of the
remote system says its server's version changed, and so does the History page; `compare` gives paired
differences per type and `compare --failures` a system's missed questions with what it retrieved; the
Prefect artifact carries the same board."""

from __future__ import annotations

import json
import re
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from clonemem.cli import app as cli_app
from tests.dashboard_kit import (
    app,
    assert_clean,
    benchmark_id,
    frame,
    imported_warehouse,
    sql,
    texts,
)
from tests.protocol_kit import Faulty, faulty

K = ("--k", "1,3")


class Versioned(Faulty):
    """A protocol server whose /v1/info version the test sets."""

    version = "0.1.0"

    def answer(self, method: str, path: str, body: dict) -> tuple[int, bytes]:
        if path == "/v1/info":
            self.calls.append(f"{method} {path}")
            return 200, json.dumps({"name": "mine", "version": self.version}).encode()
        return super().answer(method, path, body)


def cli(wh: Path, *args: str) -> str:
    got = CliRunner().invoke(cli_app, ["--warehouse", str(wh), *args])
    assert got.exit_code == 0, got.output
    return got.output


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory) -> dict:
    folder = tmp_path_factory.mktemp("board")
    wh = imported_warehouse(folder / "wh.duckdb")
    out: dict = {"wh": wh, "folder": folder}
    cli(
        wh,
        "evaluate",
        "release",
        "--systems",
        "bm25,random",
        *K,
        "--force",
        "--json",
        str(folder / "b.json"),
    )
    out["builtins"] = json.loads((folder / "b.json").read_text())["eval_run_id"]
    server = Versioned()
    with faulty(server) as url:
        cli(wh, "evaluate", "release", "--systems", f"mine={url}", *K, "--force")
        server.version = "0.1.0+boundary"
        cli(
            wh,
            "evaluate",
            "release",
            "--systems",
            f"mine={url}",
            *K,
            "--force",
            "--json",
            str(folder / "m.json"),
        )
    out["mine"] = json.loads((folder / "m.json").read_text())["eval_run_id"]
    cli(
        wh,
        "export-retrievals",
        out["builtins"],
        "--out",
        str(folder / "bm25.jsonl"),
        "--system",
        "bm25",
        "--k",
        "3",
    )
    cli(
        wh,
        "evaluate",
        "release",
        "--retrievals",
        str(folder / "bm25.jsonl"),
        "--name",
        "from_file",
        "--k",
        "3",
        "--force",
        "--json",
        str(folder / "f.json"),
    )
    out["file"] = json.loads((folder / "f.json").read_text())["eval_run_id"]
    cli(
        wh,
        "evaluate",
        "release",
        "--systems",
        "oracle",
        *K,
        "--force",
        "--sample",
        "3",
        "--seed",
        "1",
    )
    cli(
        wh, "evaluate", "locomo", "--systems", "bm25,random", "--k", "3", "--force"
    )  # its importer's protocols
    return out


@pytest.mark.prefect
def test_a_system_alone_a_file_and_the_built_ins_share_one_table(evaluated: dict) -> None:
    wh = evaluated["wh"]
    board = json.loads(cli(wh, "leaderboard", "release", "--k", "3", "--json"))
    assert board["format_version"] == "1.0" and board["metric"] == "recall_flat"
    main, *apart = board["groups"]
    assert main["reason"] is None
    rows = {r["system"]: r for r in main["rows"]}
    assert set(rows) == {"bm25", "random", "mine", "from_file"}
    assert {s: r["eval_run_id"] for s, r in rows.items()} == {
        "bm25": evaluated["builtins"],
        "random": evaluated["builtins"],
        "mine": evaluated["mine"],
        "from_file": evaluated["file"],
    }
    assert {r["mode"] for r in rows.values()} == {"replay"}
    extra = rows["mine"]["provenance"][
        "extra"
    ]  # `version` (protocol 1.2) or `remote_version` before it
    assert extra.get("version", extra.get("remote_version")) == "0.1.0+boundary"
    assert rows["from_file"]["provenance"]["extra"]["sha256"]
    # the file holds bm25's own retrievals: the same recall, ranked together
    assert (
        rows["from_file"]["metrics"]["recall_flat"]["value"]
        == rows["bm25"]["metrics"]["recall_flat"]["value"]
    )
    assert all(r["metrics"]["recall_flat"]["ci_low"] is not None for r in rows.values())
    assert all(r["offline"] == "offline answerer and judge" for r in rows.values())
    # the quick run stands apart, saying why
    assert [(g["reason"], [r["system"] for r in g["rows"]]) for g in apart] == [
        ("questions sample 3/6 seed 1 (main table: all questions)", ["oracle"])
    ]
    stored = sql(
        wh, "SELECT sample_json::VARCHAR AS s FROM eval_runs WHERE sample_json IS NOT NULL"
    )
    assert json.loads(stored["s"][0]) == {
        "kind": "sample",
        "n": 3,
        "seed": 1,
        "questions": 3,
        "of": 6,
    }
    modes = sql(wh, "SELECT DISTINCT system, retrieval_mode FROM eval_system_stats ORDER BY system")
    assert dict(modes.rows()) == {
        "bm25": "replay",
        "from_file": "replay",
        "mine": "replay",
        "oracle": "replay",
        "random": "replay",
    }


@pytest.mark.prefect
def test_the_leaderboard_and_history_mark_the_server_version_change(
    evaluated: dict, monkeypatch
) -> None:
    wh = evaluated["wh"]
    text = cli(wh, "leaderboard", "release", "--k", "3")
    assert re.search(
        r"changed since its previous evaluation: extra (remote_)?version: 0\.1\.0 → 0\.1\.0\+boundary",
        text,
    )
    assert (
        evaluated["mine"] in text
        and "mine 0.1.0+boundary" in text
        and "at http://127.0.0.1:" in text
    )
    monkeypatch.setenv("CLONEMEM_WAREHOUSE", str(wh))
    at = app("History", benchmark=benchmark_id(wh, "release"))
    assert_clean(at, "History")
    changes = frame(at, "system", "changes").filter(pl.col("system") == "mine")
    assert changes.height == 1 and re.fullmatch(
        r"extra (remote_)?version: 0\.1\.0 → 0\.1\.0\+boundary", changes["changes"][0]
    )
    assert "No change of code" not in texts(at)


@pytest.mark.prefect
def test_compare_gives_paired_differences_per_type_and_failures_what_was_retrieved(
    evaluated: dict,
) -> None:
    wh = evaluated["wh"]
    got = json.loads(cli(wh, "compare", "release", "bm25", "random", "mine", "--k", "3", "--json"))
    assert got["systems"] == ["bm25", "random", "mine"] and got["k"] == 3 and got["unpaired"] == 0
    overall = {d["system"]: d for d in got["differences"] if d["question_type"] == "all"}
    assert (
        overall["random"]["n"] == 6
        and overall["random"]["ci_low"] <= overall["random"]["difference"]
    )
    assert overall["random"]["difference"] == pytest.approx(
        overall["random"]["value"] - overall["random"]["baseline_value"]
    )
    assert {d["question_type"] for d in got["differences"]} - {"all"}  # per question type too
    text = cli(wh, "compare", "release", "bm25", "random", "--k", "3")
    assert "questions they disagree on most" in text and "paired 95% bootstrap interval" in text
    missed = json.loads(cli(wh, "compare", "release", "random", "--failures", "--k", "3", "--json"))
    assert missed["system"] == "random" and missed["failures"]
    first = missed["failures"][0]
    assert first["gold"] and first["retrieved"] and first["texts"] and first["recall_flat"] < 1
    assert "retrieved:" in cli(wh, "compare", "release", "random", "--failures", "--k", "3")


@pytest.mark.prefect
def test_protocol_columns_carry_the_standard_protocols_groups(evaluated: dict) -> None:
    wh = evaluated["wh"]
    board = json.loads(cli(wh, "leaderboard", "locomo", "--protocol", "locomo", "--json"))
    assert board["protocol"] == "locomo"
    rows = {r["system"]: r for g in board["groups"] for r in g["rows"]}
    groups = {p["group"]: p for p in rows["bm25"]["protocol"]}
    assert {"overall", "overall_with_adversarial", "single-hop"} <= set(groups)
    assert all(p["protocol"] == "locomo" and p["k"] == 3 and "f1" in p for p in groups.values())
    stored = sql(
        wh,
        "SELECT value FROM eval_protocol_metrics WHERE eval_run_id = ? AND system = 'bm25' "
        "AND protocol = 'locomo' AND group_name = 'overall' AND metric = 'f1'",
        [rows["bm25"]["eval_run_id"]],
    )
    assert groups["overall"]["f1"] == stored["value"][0]
    assert "locomo overall (n " in cli(wh, "leaderboard", "locomo", "--protocol", "locomo")
    got = CliRunner().invoke(
        cli_app, ["--warehouse", str(wh), "leaderboard", "release", "--protocol", "locomo"]
    )
    assert got.exit_code == 1 and "computed the protocol 'locomo'" in got.output


@pytest.mark.prefect
def test_compare_and_leaderboard_refuse_what_they_cannot_show(evaluated: dict) -> None:
    wh = evaluated["wh"]
    runner = CliRunner()
    got = runner.invoke(cli_app, ["--warehouse", str(wh), "compare", "release", "bm25", "nobody"])
    assert got.exit_code == 1 and "nobody: not evaluated on 'release'" in got.output
    got = runner.invoke(cli_app, ["--warehouse", str(wh), "compare", "release", "bm25"])
    assert got.exit_code == 2 and "two systems or more" in got.output
    got = runner.invoke(
        cli_app, ["--warehouse", str(wh), "evaluate", "release", "--limit", "2", "--sample", "2"]
    )
    assert got.exit_code == 2 and "--limit and --sample exclude each other" in got.output


@pytest.mark.prefect
def test_the_prefect_artifact_is_the_benchmark_board(evaluated: dict) -> None:
    from clonemem.schemas.results import EvaluationResult
    from clonemem.tasks.reporting import leaderboard_artifact

    result = EvaluationResult.model_validate_json((evaluated["folder"] / "f.json").read_text())
    markdown = leaderboard_artifact(result, str(evaluated["wh"]))
    main = markdown.split("### k = 3: main table")[1].split("###")[0]
    for system in ("bm25", "random", "mine", "from_file"):
        assert f"| {system} | replay | all questions |" in main
    assert evaluated["mine"] in main and "apart: questions sample 3/6 seed 1" in markdown
    assert "Offline answerer and judge; 95% bootstrap intervals." in markdown


CHROMIUM = Path("/usr/bin/chromium")


@pytest.mark.slow
@pytest.mark.prefect
def test_leaderboard_and_history_in_chromium(evaluated: dict, tmp_path: Path) -> None:
    """In a real browser: the Leaderboard page's board (main table and the quick run apart) and the History
    page (the change of the server's version, the axis of evaluations in order) render without an error,
    each within a bound."""
    import subprocess
    import sys
    import time

    from tests.dashboard_kit import descendants, free_port, stop, wait_healthy

    if not CHROMIUM.exists():
        pytest.skip("Debian's chromium is not installed (apt-get install -y chromium)")
    from playwright.sync_api import sync_playwright

    port = free_port()
    exe = str(Path(sys.executable).with_name("clonemem"))
    proc = subprocess.Popen(
        [exe, "dashboard", "--warehouse", str(evaluated["wh"]), "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    seconds: dict[str, float] = {}
    try:
        wait_healthy(port, proc, timeout=90.0)
        with sync_playwright() as pw:
            browser = pw.chromium.launch(
                executable_path=str(CHROMIUM),
                args=[
                    "--headless",
                    "--no-sandbox",
                    "--disable-gpu",
                    "--disable-background-networking",
                ],
            )
            try:
                page = browser.new_page(viewport={"width": 1400, "height": 2200})
                for title, url, expect in (
                    (
                        "Leaderboard",
                        "leaderboard",
                        "Apart (not comparable with the main table: questions sample 3/6 seed 1",
                    ),
                    ("History", "history", "What changed between a system's evaluations"),
                ):
                    started = time.perf_counter()
                    page.goto(f"http://127.0.0.1:{port}/{url}?benchmark=release")
                    page.get_by_text(expect).first.wait_for(timeout=90_000)
                    page.locator('[data-testid="stVegaLiteChart"]').first.wait_for(
                        state="attached", timeout=90_000
                    )
                    page.wait_for_function(
                        "!document.querySelector('[data-testid=\"stStatusWidget\"]')",
                        timeout=90_000,
                    )
                    seconds[title] = time.perf_counter() - started
                    assert page.locator('[data-testid="stException"]').count() == 0, title
                    page.screenshot(path=str(tmp_path / f"{url}.png"), full_page=True)
                    if title == "History":
                        assert "No change of code" not in page.inner_text("body")
            finally:
                browser.close()
    finally:
        children = descendants(proc.pid)
        stop(proc.pid)
        for pid in children:
            stop(pid, timeout=2)
    # a warm page renders in a few seconds on a quiet machine; the bound leaves room for a loaded one
    assert all(s < 60 for s in seconds.values()), seconds


@pytest.mark.prefect
def test_the_leaderboard_page_shows_the_board_and_compares_only_shared_systems(
    evaluated: dict, monkeypatch
) -> None:
    """The page's board is the command's; "Compare with" over two evaluations that share no system says
    so (on 810f4d0: a table of NaN on one side, captioned "Same provenance")."""
    wh = evaluated["wh"]
    monkeypatch.setenv("CLONEMEM_WAREHOUSE", str(wh))
    at = app("Leaderboard", benchmark=benchmark_id(wh, "release"))
    assert_clean(at, "Leaderboard")
    at.selectbox(key="board_k").set_value(3).run(timeout=120)
    board = frame(at, "rank", "system", "mode", "questions", "eval_run_id", "provenance")
    main = board.filter(pl.col("questions") == "all questions")
    assert set(main["system"]) == {"bm25", "random", "mine", "from_file"} and set(main["mode"]) == {
        "replay"
    }
    assert "Apart** (not comparable with the main table: questions sample 3/6 seed 1" in texts(at)
    at.selectbox(key="lb_eval").set_value(evaluated["mine"]).run(timeout=120)
    at.selectbox(key="lb_other").set_value(evaluated["builtins"]).run(timeout=120)
    assert_clean(at, "Leaderboard")
    page = texts(at)
    assert "share no system" in page and "Same provenance" not in page
