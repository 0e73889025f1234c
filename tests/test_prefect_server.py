"""The deployments on a real Prefect server: `prefect server start`, a process work pool,
`prefect --no-prompt deploy --all` from this folder and a process worker — the README's commands —
then runs of the `pipeline` deployment, its schedules and its failures.

The schedules test is the one that fails with SQLAlchemy 2.1.9: the server's scheduler then raises
`InvalidRequestError: Can't evaluate bulk DML statement` on every loop and creates no run.
"""

from __future__ import annotations

import datetime as dt
import time
import tomllib

import pytest

from tests.pipeline_kit import TINY
from tests.prefect_server_kit import Stack

pytestmark = [pytest.mark.prefect_server, pytest.mark.slow, pytest.mark.timeout(900)]

# The smallest run that goes through every stage: one tiny persona, questions, the gate, two memory
# systems at one k, an export.
EVALUATION = """[evaluation]
systems = ["oracle", "bm25"]
k = [5]
bootstrap_samples = 50
"""


def tiny(name: str, **gate: float) -> str:
    text = TINY.replace('name = "tiny"', f'name = "{name}"').replace("{personas}", "1") + EVALUATION
    for key, value in gate.items():
        text = text.replace(f"{key} = 1.0", f"{key} = {value}")
    return text


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory):
    folder = tmp_path_factory.mktemp("prefect-server")
    s = Stack(folder, folder / "wh.duckdb")
    try:
        s.start_server()
        s.cli("prefect", "work-pool", "create", "clonemem", "--type", "process")
        s.cli("prefect", "--no-prompt", "deploy", "--all")
        s.start_worker("worker")
        config = folder / "tiny-deploy.toml"
        config.write_text(tiny("tiny-deploy"), "utf-8")
        # the rejection rate of this seed's questions is above zero (5 of 32 items), so this gate fails;
        # given as a mapping, as the UI's form sends it
        strict = tomllib.loads(tiny("tiny-strict", max_rejection_rate=0.0))
        # the runs go on at once; each pipeline has a warehouse of its own (one writer per warehouse)
        s.runs = {
            "ok": s.run_deployment(
                "pipeline/pipeline", {"config": str(config), "export_dir": str(folder / "export")}
            ),
            "gate": s.run_deployment(
                "pipeline/pipeline",
                {"config": strict, "warehouse_path": str(folder / "strict.duckdb")},
            ),
            "path": s.run_deployment("pipeline/pipeline", {"config": str(folder / "missing.toml")}),
        }
        yield s
    finally:
        s.stop_all()


def test_config_parameter_is_a_form_and_a_path(stack: Stack) -> None:
    schema = stack.deployment("pipeline/pipeline")["parameter_openapi_schema"]
    config = schema["properties"]["config"]
    assert {"$ref": "#/definitions/RunConfig"} in config["anyOf"]  # the UI renders this as a form
    assert {"type": "string"} in config["anyOf"]  # ... and accepts the path of a TOML file
    run_config = schema["definitions"]["RunConfig"]
    assert run_config["type"] == "object"
    assert {"name", "seed", "models", "generation", "qa", "gate", "evaluation"} <= set(
        run_config["properties"]
    )
    personas = schema["definitions"]["GenerationConfig"]["properties"]["personas"]
    assert personas["type"] == "integer" and personas["default"] == 1
    assert schema["properties"]["distribute"]["type"] == "boolean"


def test_schedules_create_scheduled_runs(stack: Stack) -> None:
    """The server's scheduler, not the deploy command, creates the upcoming runs of the cron schedules."""
    nightly = {
        name: stack.deployment(name)["id"]
        for name in ("pipeline/pipeline-nightly", "evaluate/evaluate-nightly")
    }
    hours = {"pipeline/pipeline-nightly": 2, "evaluate/evaluate-nightly": 3}
    deadline = (
        time.monotonic() + 150
    )  # the recent-deployments loop runs every 5 s, the main loop every 60 s
    while True:
        runs = stack.flow_runs(
            deployment_id={"any_": list(nightly.values())}, state={"type": {"any_": ["SCHEDULED"]}}
        )
        by_deployment = {
            name: [r for r in runs if r["deployment_id"] == dep] for name, dep in nightly.items()
        }
        if all(by_deployment.values()) or time.monotonic() > deadline:
            break
        time.sleep(2)
    errors = [line for line in stack.tail("server", 400).splitlines() if "Error" in line]
    assert all(by_deployment.values()), (
        f"no scheduled runs: { ({k: len(v) for k, v in by_deployment.items()}) }; "
        f"server errors: {errors[-5:]}"
    )
    now = dt.datetime.now(dt.timezone.utc)
    for name, runs in by_deployment.items():
        for run in runs:
            start = dt.datetime.fromisoformat(run["expected_start_time"].replace("Z", "+00:00"))
            assert (
                run["auto_scheduled"]
                and start > now
                and (start.hour, start.minute) == (hours[name], 0)
            ), run


@pytest.mark.ci
def test_pipeline_deployment_run_lands_a_gated_evaluated_benchmark(stack: Stack) -> None:
    from clonemem.warehouse import Warehouse

    run = stack.wait(stack.runs["ok"])
    assert run["state"]["type"] == "COMPLETED", (run["state"], stack.tail("worker"))
    deployment_id = stack.deployment("pipeline/pipeline")["id"]
    assert run["deployment_id"] == deployment_id
    with Warehouse.open_reader(stack.warehouse) as wh:
        bid, gate, personas, questions = wh.rows(
            "SELECT id, gate_status, personas, questions FROM v_benchmarks WHERE name = 'tiny-deploy'"
        )[0]
        assert (gate, personas) == ("passed", 1) and questions > 0
        leaderboard = wh.rows(
            "SELECT DISTINCT system, k FROM eval_metrics JOIN eval_runs USING (eval_run_id) "
            "WHERE benchmark_id = ? ORDER BY 1",
            [bid],
        )
        assert leaderboard == [("bm25", 5), ("oracle", 5)]
        assert wh.rows(
            "SELECT flow_run_id, deployment_id FROM runs WHERE kind = 'pipeline' AND benchmark_id = ?",
            [bid],
        ) == [(run["id"], deployment_id)]
    exported = sorted(p.name for p in (stack.folder / "export").iterdir())
    assert len(exported) == 1 and exported[0].endswith("_benchmark_en.json")


def test_a_failed_gate_fails_the_run_and_names_the_expectations(stack: Stack) -> None:
    from clonemem.warehouse import Warehouse

    run = stack.wait(stack.runs["gate"])
    assert run["state"]["type"] == "FAILED", run["state"]
    message = run["state"]["message"]
    with Warehouse.open_reader(stack.folder / "strict.duckdb") as wh:
        assert (
            wh.scalar("SELECT gate_status FROM benchmarks WHERE name = 'tiny-strict'") == "failed"
        )
        failed = wh.rows("""SELECT r.suite, r.expectation FROM gate_results r JOIN gate_runs g USING (gate_run_id)
                            JOIN benchmarks b USING (benchmark_id) WHERE b.name = 'tiny-strict' AND NOT r.success""")
        assert wh.scalar("SELECT count(*) FROM eval_runs") == 0  # stopped before evaluation
    assert failed and "failed the gate" in message, message
    for suite, expectation in failed:
        assert f"{suite}: {expectation}" in message, (suite, expectation, message)


def test_a_bad_config_path_names_the_deployment_parameter(stack: Stack) -> None:
    run = stack.wait(stack.runs["path"])
    assert run["state"]["type"] == "FAILED", run["state"]
    message = run["state"]["message"]
    assert "flow parameter `config`" in message and "missing.toml" in message, message
    assert run["parameters"]["config"].endswith("missing.toml")
