"""The `clonemem` command line: exit codes, messages, the read-only SQL guard, round-trips."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from clonemem.cli import app

runner = CliRunner()


def cli(*args: str, env: dict | None = None):
    return runner.invoke(app, list(args), env=env)


def test_import_export_round_trip(tmp_path: Path, demo_file: Path) -> None:
    wh = str(tmp_path / "wh.duckdb")
    got = cli("--warehouse", wh, "import-release", str(demo_file), "--name", "X")
    assert got.exit_code == 0, got.output
    assert "questions 6 (2 free-text only)" in got.output
    assert "self_reflection ×1" in got.output
    got = cli("--warehouse", wh, "export-release", "X", "--out", str(tmp_path / "out"))
    assert got.exit_code == 0
    exported = Path(got.output.strip())
    got = cli("--warehouse", str(tmp_path / "wh2.duckdb"), "import-release", str(exported), "--name", "X")
    assert got.exit_code == 0
    got = cli("--warehouse", str(tmp_path / "wh2.duckdb"), "export-release", "X", "--out", str(tmp_path / "out2"))
    assert Path(got.output.strip()).read_bytes() == exported.read_bytes()


def test_sql_counts_and_refuses_writes(tmp_path: Path, demo_file: Path) -> None:
    wh = str(tmp_path / "wh.duckdb")
    cli("--warehouse", wh, "import-release", str(demo_file), "--name", "X")
    got = cli("--warehouse", wh, "sql", "SELECT count(*) AS n FROM traces", "--format", "csv")
    assert got.exit_code == 0 and got.output.strip() == "n\n16"
    for statement in ("DELETE FROM traces", "DROP TABLE traces", "INSERT INTO traces SELECT * FROM traces",
                      "UPDATE traces SET content = ''", "COPY traces TO 'x.csv'", "ATTACH 'other.db'",
                      "SELECT 1; DELETE FROM traces"):
        got = cli("--warehouse", wh, "sql", statement)
        assert got.exit_code == 1, statement
        assert "read-only" in got.output
    got = cli("--warehouse", wh, "sql", "SELECT count(*) AS n FROM traces", "--format", "json")
    assert json.loads(got.output) == [{"n": 16}]


def test_env_var_selects_the_warehouse(tmp_path: Path, demo_file: Path) -> None:
    env = {"CLONEMEM_WAREHOUSE": str(tmp_path / "env.duckdb")}
    assert cli("import-release", str(demo_file), "--name", "Y", env=env).exit_code == 0
    got = cli("benchmarks", "--json", env=env)
    items = json.loads(got.output)
    assert items == [{"id": items[0]["id"], "name": "Y", "source": "imported", "gate_status": "pending",
                      "personas": 1, "traces": 16, "questions": 6, "status": "complete"}]


def test_broken_files_give_clear_errors_and_load_nothing(tmp_path: Path, demo_doc: dict) -> None:
    wh = str(tmp_path / "wh.duckdb")
    cases = {
        "badjson.json": '{"person_name": "x", ',
        "noquestions.json": json.dumps({k: v for k, v in demo_doc.items() if k != "questions"}),
        "missingtrace.json": json.dumps({**demo_doc, "questions": [
            {**demo_doc["questions"][0], "evidence": [{"statement": "s", "digital_trace_ids": ["ghost"]}]}]}),
        "intid.json": json.dumps({**demo_doc, "person_id": 42}),
    }
    expected = {
        "badjson.json": "$: not valid JSON",
        "noquestions.json": "$.questions: required field is missing",
        "missingtrace.json": "$.questions[0].evidence[0].digital_trace_ids[0]: evidence names trace 'ghost'",
        "intid.json": "$.person_id: Input should be a valid string",
    }
    for name, text in cases.items():
        path = tmp_path / name
        path.write_text(text, "utf-8")
        got = cli("--warehouse", wh, "import-release", str(path), "--name", "Z")
        assert got.exit_code == 1
        assert f"error: {path}: {expected[name]}" in got.output
    got = cli("--warehouse", wh, "sql", "SELECT count(*) FROM benchmarks", "--format", "csv")
    assert got.output.strip().endswith("\n0")


def test_reader_on_missing_warehouse(tmp_path: Path) -> None:
    got = cli("--warehouse", str(tmp_path / "none.duckdb"), "sql", "SELECT 1")
    assert got.exit_code == 1 and "no warehouse at" in got.output


def test_console_script_is_installed(tmp_path: Path) -> None:
    exe = Path(sys.executable).with_name("clonemem")
    out = subprocess.run([str(exe), "--help"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0
    for command in ("import-release", "export-release", "sql", "demo", "benchmarks"):
        assert command in out.stdout
