"""The `clonemem` command line: exit codes, messages, the read-only SQL guard, round-trips."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from clonemem.cli import app
from tests.cli_kit import command_built_once  # noqa: F401  # a fixture

pytestmark = pytest.mark.usefixtures("command_built_once")
runner = CliRunner()


def cli(*args: str, env: dict | None = None):
    return runner.invoke(app, list(args), env=env)


def imported(wh: Path, demo_file: Path, *names: str) -> str:
    """``demo_file`` imported under each of ``names`` into ``wh``, directly (no Prefect flow): for the
    tests of other commands; `import` itself is tested through the CLI above and below."""
    from clonemem.importers import import_files
    from clonemem.warehouse import Warehouse

    with Warehouse.open_writer(wh) as w:
        for name in names:
            import_files(w, "release", [demo_file], name)
    return str(wh)


def test_import_export_round_trip(tmp_path: Path, demo_file: Path) -> None:
    wh = str(tmp_path / "wh.duckdb")
    got = cli("--warehouse", wh, "import", "release", str(demo_file), "--name", "X")
    assert got.exit_code == 0, got.output
    assert "questions 6 (2 free-text only)" in got.output
    assert "self_reflection ×1" in got.output
    got = cli("--warehouse", wh, "export-release", "X", "--out", str(tmp_path / "out"))
    assert got.exit_code == 0
    exported = Path(got.output.strip())
    got = cli(
        "--warehouse",
        str(tmp_path / "wh2.duckdb"),
        "import",
        "release",
        str(exported),
        "--name",
        "X",
    )
    assert got.exit_code == 0
    got = cli(
        "--warehouse",
        str(tmp_path / "wh2.duckdb"),
        "export-release",
        "X",
        "--out",
        str(tmp_path / "out2"),
    )
    assert Path(got.output.strip()).read_bytes() == exported.read_bytes()


def test_sql_counts_and_refuses_writes(tmp_path: Path, demo_file: Path) -> None:
    wh = imported(tmp_path / "wh.duckdb", demo_file, "X")
    got = cli("--warehouse", wh, "sql", "SELECT count(*) AS n FROM traces", "--format", "csv")
    assert got.exit_code == 0 and got.output.strip() == "n\n16"
    for statement in (
        "DELETE FROM traces",
        "DROP TABLE traces",
        "INSERT INTO traces SELECT * FROM traces",
        "UPDATE traces SET content = ''",
        "COPY traces TO 'x.csv'",
        "ATTACH 'other.db'",
        "SELECT 1; DELETE FROM traces",
    ):
        got = cli("--warehouse", wh, "sql", statement)
        assert got.exit_code == 1, statement
        assert "read-only" in got.output
    got = cli("--warehouse", wh, "sql", "SELECT count(*) AS n FROM traces", "--format", "json")
    assert json.loads(got.output) == [{"n": 16}]


def test_env_var_selects_the_warehouse(tmp_path: Path, demo_file: Path) -> None:
    env = {"CLONEMEM_WAREHOUSE": str(tmp_path / "env.duckdb")}
    assert cli("import", "release", str(demo_file), "--name", "Y", env=env).exit_code == 0
    got = cli("benchmarks", "--json", env=env)
    items = json.loads(got.output)
    assert items == [
        {
            "id": items[0]["id"],
            "name": "Y",
            "source": "imported",
            "gate_status": "pending",
            "personas": 1,
            "traces": 16,
            "questions": 6,
            "status": "complete",
        }
    ]


def test_broken_files_give_clear_errors_and_load_nothing(tmp_path: Path, demo_doc: dict) -> None:
    wh = str(tmp_path / "wh.duckdb")
    cases = {
        "badjson.json": '{"person_name": "x", ',
        "noquestions.json": json.dumps({k: v for k, v in demo_doc.items() if k != "questions"}),
        "missingtrace.json": json.dumps(
            {
                **demo_doc,
                "questions": [
                    {
                        **demo_doc["questions"][0],
                        "evidence": [{"statement": "s", "digital_trace_ids": ["ghost"]}],
                    }
                ],
            }
        ),
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
        got = cli("--warehouse", wh, "import", "release", str(path), "--name", "Z")
        assert got.exit_code == 1
        assert f"error: {path}: {expected[name]}" in got.output
    assert not Path(wh).exists()  # a failed import into no warehouse creates none (issue 12)


def test_reader_on_missing_warehouse(tmp_path: Path) -> None:
    got = cli("--warehouse", str(tmp_path / "none.duckdb"), "sql", "SELECT 1")
    assert got.exit_code == 1 and "no warehouse at" in got.output


def test_console_script_is_installed(tmp_path: Path) -> None:
    exe = Path(sys.executable).with_name("clonemem")
    out = subprocess.run([str(exe), "--help"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0
    for command in ("import", "export-release", "sql", "demo", "benchmarks"):
        assert command in out.stdout


# -- hardening: one line per problem, exit codes, no orphans, no noise ----------------------------------


def _error_lines(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.strip()]


def test_bad_config_paths_give_one_line(tmp_path: Path) -> None:
    latin = tmp_path / "latin.toml"
    latin.write_bytes('name = "caf\xe9"\n'.encode("latin-1"))
    empty = tmp_path / "empty.toml"
    empty.write_text("", "utf-8")
    for path, expected in (
        (tmp_path, "is a folder, not a config file"),
        (latin, "not UTF-8 text"),
        (empty, "the config file is empty; add settings, or pass --allow-empty-config"),
    ):
        got = cli("--warehouse", str(tmp_path / "wh.duckdb"), "generate", "--config", str(path))
        assert got.exit_code == 1, got.output
        lines = _error_lines(got.output)
        assert len(lines) == 1 and lines[0].startswith(f"error: {path}: {expected}"), got.output
        assert "Traceback" not in got.output
    assert not (tmp_path / "wh.duckdb").exists()


def test_unexpected_errors_are_one_line_and_debug_keeps_the_traceback(
    tmp_path: Path, monkeypatch
) -> None:
    from clonemem.exporters import release

    def boom(*_a, **_k):
        raise KeyError("surprise")

    wh = imported(
        tmp_path / "wh.duckdb",
        Path(__file__).parents[1] / "clonemem/data/demo_release/lin_chen.json",
        "X",
    )
    monkeypatch.setattr(release, "export_release", boom)
    got = cli("--warehouse", wh, "export-release", "X", "--out", str(tmp_path / "o"))
    assert got.exit_code == 1
    assert _error_lines(got.output) == [
        "error: KeyError: 'surprise' (unexpected; re-run with --debug for the traceback)"
    ]
    got = cli("--warehouse", wh, "--debug", "export-release", "X", "--out", str(tmp_path / "o"))
    assert isinstance(got.exception, KeyError)


def test_commands_run_in_one_process_leave_no_last_words_behind(
    tmp_path: Path, demo_file: Path
) -> None:
    """What a Ctrl-C would still write on the way out (the runs of the command under way) is dropped when
    the command ends: a process that runs many commands (a notebook, a service, these tests) does not
    collect one hook per command, each opening a warehouse long done with as the process leaves."""
    from clonemem import interrupts

    before = list(interrupts._last_words)
    for name in ("A", "B", "C"):
        wh = imported(tmp_path / f"{name}.duckdb", demo_file, name)
        assert cli("--warehouse", wh, "drop", name).exit_code == 0
    assert interrupts._last_words == before


def test_drop_removes_a_benchmark_in_one_go(tmp_path: Path, demo_file: Path) -> None:
    wh = imported(tmp_path / "wh.duckdb", demo_file, "A", "B")
    got = cli("--warehouse", wh, "drop", "A")
    assert got.exit_code == 0 and got.output.startswith("dropped benchmark 'A'")
    names = [
        b["name"]
        for b in json.loads(cli("--warehouse", wh, "benchmarks", "--json", "--all").output)
    ]
    assert names == ["B"]
    got = cli("--warehouse", wh, "sql", "SELECT count(*) FROM traces", "--format", "csv")
    assert got.output.strip() == "count_star()\n16"  # B's traces are all still there
    got = cli("--warehouse", wh, "drop", "A")
    assert got.exit_code == 1 and "A" in got.output


@pytest.mark.slow  # console-script runs, each starting its own Prefect server
def test_a_system_that_fails_to_evaluate_gives_its_own_exit_code(
    tmp_path: Path, demo_file: Path
) -> None:
    # the console script in a fresh process, as a user meets it: Prefect's own logging must not leak a traceback
    (tmp_path / "broken_system.py").write_text(
        "from clonemem.memory.simple import RandomControl\n\n"
        "class Broken(RandomControl):\n"
        "    name = 'broken_for_test'\n\n"
        "    def retrieve(self, question, k):\n"
        "        raise RuntimeError('index exploded')\n",
        "utf-8",
    )
    exe = Path(sys.executable).with_name("clonemem")
    wh = str(tmp_path / "wh.duckdb")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    for var in ("PREFECT_LOGGING_LEVEL", "PREFECT_LOGGING_SERVER_LEVEL"):
        env.pop(var, None)

    def run(*a: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(exe), "--warehouse", wh, *a],
            capture_output=True,
            text=True,
            timeout=240,
            env=env,
        )

    assert run("import", "release", str(demo_file), "--name", "X").returncode == 0
    got = run("evaluate", "X", "--systems", "random,broken_system:Broken", "--k", "5", "--force")
    output = got.stdout + got.stderr
    assert got.returncode == 5, output
    last = _error_lines(output)[-1]
    assert last.startswith("error: memory system 'broken_system:Broken': retrieve for question "), (
        output
    )
    assert "failed: RuntimeError: index exploded; nothing was stored" in last, output
    assert "leave it out of --systems" in last and "Traceback" not in output


@pytest.mark.slow
@pytest.mark.prefect
def test_gate_failure_and_empty_generation_have_their_own_exit_codes(tmp_path: Path) -> None:
    from tests.pipeline_kit import TINY, clonemem

    strict = tmp_path / "strict.toml"
    strict.write_text(
        TINY.replace("{personas}", "1").replace(
            "max_rejection_rate = 1.0", "max_rejection_rate = 0.0"
        )
    )
    wh, home = tmp_path / "wh.duckdb", tmp_path / "home"
    got = clonemem(wh, home, "generate", "--config", str(strict))
    assert got.returncode == 3, got.stderr
    assert got.stderr.splitlines()[-1].startswith(
        "error: benchmark 'tiny' was stored but failed the gate"
    )
    assert "Traceback" not in got.stderr and "leaked" not in got.stderr
    got = clonemem(wh, home, "gate", "tiny")
    assert got.returncode == 3 and "`clonemem evaluate` refuses it unless --force" in got.stderr

    broken = tmp_path / "broken.toml"
    broken.write_text(
        TINY.replace("{personas}", "1").replace('name = "tiny"', 'name = "broken"')
        + "transient_failure_rate = 0.99\nmax_retries = 0\n"
    )
    got = clonemem(wh, tmp_path / "home2", "generate", "--config", str(broken))
    assert got.returncode == 4, got.stderr
    assert got.stderr.splitlines()[-1].startswith("error: no persona was generated")
    listed = json.loads(clonemem(wh, home, "benchmarks", "--json").stdout)
    assert [b["name"] for b in listed] == ["tiny"]  # the empty one is not listed as a benchmark


def _children(pid: int) -> list[int]:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


@pytest.mark.prefect
def test_prefect_server_dies_with_a_killed_cli_run(tmp_path: Path) -> None:
    import os
    import signal
    import time

    from tests.pipeline_kit import start, tiny_config

    proc = start(
        tmp_path / "wh.duckdb",
        tmp_path / "home",
        "generate",
        "--config",
        str(tiny_config(tmp_path)),
    )
    deadline, server = time.monotonic() + 240, None
    while time.monotonic() < deadline and server is None and proc.poll() is None:
        server = next(
            (c for c in _children(proc.pid) if "prefect.server.api.server" in _cmdline(c)), None
        )
        time.sleep(0.2)
    assert server is not None, "the CLI run started no Prefect server"
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and "prefect.server.api.server" in _cmdline(server):
        time.sleep(0.2)
    assert "prefect.server.api.server" not in _cmdline(server), (
        "the Prefect server outlived its CLI run"
    )
