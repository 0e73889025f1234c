"""Every LLM call has a run that exists: a run's row is `running` from before its first call and ends
`completed`, `failed`, `interrupted` or `budget`; a run found `running` by the next run of its kind and
benchmark (its process died) becomes `crashed`, and the next run names it in `resumed_from`. After
SIGKILL and a resume, the spend per benchmark (calls joined through their runs) equals an uninterrupted
run's."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from clonemem import runtime
from clonemem.llm.types import BudgetExceeded, CallRecord
from clonemem.schemas.config import RunConfig
from clonemem.tasks.runs import begin_run_task, opener, tracked
from clonemem.warehouse import Warehouse
from clonemem.warehouse.landing import Landing, land
from clonemem.warehouse.runs import RunRecord, record_run, utcnow
from tests.pipeline_kit import clonemem, tiny_config

BID = "b-1"


def _run(run_id: str, kind: str = "generate") -> RunRecord:
    return RunRecord(run_id, kind, BID, utcnow())  # type: ignore[arg-type]


def _status(wh_path: Path) -> dict[str, tuple]:
    with Warehouse.open_reader(wh_path) as r:
        return {
            run_id: (status, resumed_from)
            for run_id, status, resumed_from in r.rows(
                "SELECT run_id, status, resumed_from FROM runs"
            )
        }


def _call(run_id: str, n: int) -> CallRecord:
    return CallRecord(
        call_id=f"c{n}",
        run_id=run_id,
        stage="generation.persona",
        role="generator",
        provider="offline",
        model="world",
        is_offline=True,
        prompt_hash="h",
        started_at=utcnow(),
        latency_ms=5.0,
        attempts=1,
    )


def test_a_run_row_is_written_before_the_first_call_and_finished_with_its_status(
    wh_path: Path,
) -> None:
    with Warehouse.open_writer(wh_path):
        pass
    run = begin_run_task.fn(str(wh_path), _run("r1"))
    assert run.status == "running" and run.resumed_from is None
    assert _status(wh_path) == {}  # nothing yet: a run served wholly from the cache writes nothing
    rt = runtime.Runtime(
        RunConfig(), run_id="r1", warehouse=str(wh_path), on_start=opener(str(wh_path), run)
    )
    with runtime.use(rt):
        runtime.paid(
            lambda rec: None, covers=None
        )  # a step about to call a model (outside a cached task)
        assert _status(wh_path) == {"r1": ("running", None)}
        runtime.paid(lambda rec: None, covers=None)  # once only
    with Warehouse.open_writer(wh_path) as wh:
        record_run(wh, run.finished("completed"))
    assert _status(wh_path) == {"r1": ("completed", None)}


@pytest.mark.parametrize(
    ("error", "status"),
    [
        (ValueError("boom"), "failed"),
        (BudgetExceeded("over budget"), "budget"),
        (KeyboardInterrupt(), "interrupted"),
    ],
)
def test_a_run_that_raises_is_recorded_with_its_status(
    wh_path: Path, error: BaseException, status: str
) -> None:
    run = _run("r1")
    with pytest.raises(type(error)), tracked(str(wh_path), run):
        raise error
    with Warehouse.open_reader(wh_path) as r:
        assert r.rows("SELECT status, error, finished_at IS NOT NULL FROM runs") == [
            (status, str(error) or type(error).__name__, True)
        ]


def test_a_run_left_running_is_crashed_and_resumed(wh_path: Path) -> None:
    with Warehouse.open_writer(wh_path) as wh:
        from clonemem.warehouse.runs import open_run

        open_run(wh, _run("dead"))  # a process killed mid-run left this
        open_run(wh, _run("other", "qa"))  # another kind: not this run's business
    resumed = begin_run_task.fn(str(wh_path), _run("next"))
    assert resumed.resumed_from == "dead"
    assert _status(wh_path) == {
        "dead": ("crashed", None),
        "other": ("running", None),
        "next": ("running", "dead"),
    }  # a resume is recorded at once
    with Warehouse.open_writer(wh_path) as wh:
        record_run(wh, resumed.finished("completed"))
    # the latest run completed: the one after it resumes nothing, and writes nothing to begin
    assert begin_run_task.fn(str(wh_path), _run("later")).resumed_from is None
    assert "later" not in _status(wh_path)


def test_landed_calls_of_a_run_without_a_row_get_one(wh_path: Path) -> None:
    """A call whose run left no row (a worker's persona run behind a bundle) is owned on landing."""
    from clonemem.warehouse.content import PersonaRows
    from clonemem.warehouse.landing import PersonaLanding

    with Warehouse.open_writer(wh_path) as wh:
        wh.upsert(
            "benchmarks",
            [
                {
                    "benchmark_id": BID,
                    "name": "b",
                    "source": "generated",
                    "gate_status": "pending",
                    "is_offline": True,
                }
            ],
        )
        land(
            wh,
            Landing(
                BID,
                "persona",
                [PersonaLanding(PersonaRows("p1", {}), digest="d")],
                calls=[_call("worker", 1), _call("worker", 2)],
                call_runs="completed",
            ),
        )
        assert wh.rows("SELECT kind, benchmark_id, status FROM runs WHERE run_id = 'worker'") == [
            ("generate", BID, "completed")
        ]
        assert (
            wh.scalar(
                "SELECT count(*) FROM llm_calls WHERE run_id NOT IN (SELECT run_id FROM runs)"
            )
            == 0
        )


# -- through the real CLI: SIGKILL mid-run, resume --------------------------------------------------------

SPEND = """SELECT r.benchmark_id, count(*), sum(c.input_tokens), sum(c.output_tokens)
           FROM llm_calls c JOIN runs r USING (run_id) GROUP BY ALL ORDER BY 1"""


def _ledger(wh: Path) -> tuple[list, int, list]:
    with Warehouse.open_reader(wh) as r:
        return (
            r.rows(SPEND),
            r.scalar(
                "SELECT count(*) FROM llm_calls WHERE run_id NOT IN (SELECT run_id FROM runs)"
            ),
            r.rows("SELECT kind, status, resumed_from IS NOT NULL FROM runs ORDER BY started_at"),
        )


@pytest.mark.slow
@pytest.mark.faults
@pytest.mark.prefect
@pytest.mark.timeout(1500)
def test_sigkill_then_resume_owns_every_call_and_spends_as_an_uninterrupted_run(
    tmp_path: Path,
) -> None:
    clean = tmp_path / "clean"
    clean.mkdir()
    got = clonemem(
        clean / "wh.duckdb", clean / "home", "generate", "--config", str(tiny_config(clean))
    )
    assert got.returncode == 0, got.stderr
    reference, unowned, _ = _ledger(clean / "wh.duckdb")
    assert unowned == 0

    # killed right after generation landed its persona, then right after stage IV landed its questions:
    # each time before the run could record that it finished
    wh, home = tmp_path / "wh.duckdb", tmp_path / "home"
    cfg = tiny_config(tmp_path)
    for point, kind in (("generation.landed:1", "generate"), ("qa.landed:1", "qa")):
        got = clonemem(wh, home, "generate", "--config", str(cfg), kill_at=point)
        assert got.returncode == -signal.SIGKILL, (point, got.stderr)
        spend, unowned, runs = _ledger(wh)
        assert unowned == 0, point
        assert runs[-1] == (kind, "running", False), (point, runs)  # killed: never finished
    got = clonemem(wh, home, "generate", "--config", str(cfg))
    assert got.returncode == 0, got.stderr
    spend, unowned, runs = _ledger(wh)
    assert unowned == 0
    assert spend == reference  # calls, input and output tokens per benchmark
    # the second command's generation found the first's `running` and resumed it (from the cache); the
    # third's stage IV did the same; its generation had nothing to do and wrote nothing
    assert runs == [
        ("generate", "crashed", False),
        ("generate", "completed", True),
        ("qa", "crashed", False),
        ("qa", "completed", True),
    ], runs


def test_an_error_raised_while_ctrl_c_unwinds_is_recorded_as_the_interrupt(
    wh_path: Path, monkeypatch
) -> None:
    """Issue 31, item 4: Prefect's engine, stopped mid-task by the KeyboardInterrupt, raised its own error
    ("Task run is not set"), and the run's row ended `failed` with it instead of `interrupted`."""
    import threading

    from clonemem import interrupts

    pressed = threading.Event()
    pressed.set()
    monkeypatch.setattr(interrupts, "_received", pressed)  # Ctrl-C arrived
    with pytest.raises(ValueError), tracked(str(wh_path), _run("r1")):
        raise ValueError("Task run is not set")
    with Warehouse.open_reader(wh_path) as r:
        assert r.rows("SELECT status, error FROM runs") == [
            ("interrupted", "KeyboardInterrupt (raised while unwinding: Task run is not set)")
        ]


def test_a_ctrl_c_ends_every_run_this_process_still_has_running(wh_path: Path) -> None:
    """Ctrl-C reaches the main thread only. When it came as stage IV began, the generation flow was still
    finishing in another thread: its row stayed `running` after the process left (found by
    tests/test_interrupt_runs.py). The interrupted run's handler ends every run row of this process;
    another process's row is its own business."""
    from dataclasses import replace

    from clonemem.warehouse import owners
    from clonemem.warehouse.runs import open_run

    me = owners.this_process()
    mine = {"host": me.host, "pid": me.pid, "process_start": me.process_start}
    with Warehouse.open_writer(wh_path) as wh:
        open_run(wh, replace(_run("generate"), **mine))  # a flow of another thread
        open_run(wh, replace(_run("elsewhere", "qa"), host=me.host, pid=1, process_start="x"))
    with pytest.raises(KeyboardInterrupt), tracked(str(wh_path), replace(_run("pipe"), **mine)):
        raise KeyboardInterrupt
    assert _status(wh_path) == {
        "generate": ("interrupted", None),
        "pipe": ("interrupted", None),
        "elsewhere": ("running", None),
    }
