"""The `gym` deployment on a real Prefect server (the README's Deployments commands: a server, a process
work pool, `prefect --no-prompt deploy --all`, a worker): a run lands a gym run owned by the flow run."""

from __future__ import annotations

import pytest

from tests.prefect_server_kit import Stack

pytestmark = [pytest.mark.prefect_server, pytest.mark.slow, pytest.mark.timeout(900)]

SMALL = """name = "gym-deploy"
seed = 3
[generation]
personas = 2
major_events = 2
[gym]
periods = 3
states_per_question = 2
turns_per_exposure = 2
questions = 4
variables = 4
"""


def test_gym_deployment_run_lands_a_gym_run(tmp_path) -> None:
    from clonemem.warehouse import Warehouse

    stack = Stack(tmp_path, tmp_path / "wh.duckdb")
    try:
        stack.start_server()
        stack.cli("prefect", "work-pool", "create", "clonemem", "--type", "process")
        stack.cli("prefect", "--no-prompt", "deploy", "--all")
        defaults = stack.deployment("gym/gym")["parameters"]
        assert defaults["config"] == "configs/gym-base.toml" and defaults["systems"] == [
            "bm25",
            "full_context",
            "no_memory",
        ]
        stack.start_worker("worker")
        config = tmp_path / "gym.toml"
        config.write_text(SMALL, "utf-8")
        run_id = stack.run_deployment(
            "gym/gym", {"config": str(config), "systems": ["bm25", "no_memory"]}
        )
        run = stack.wait(run_id)
        assert run["state"]["type"] == "COMPLETED", (run["state"], stack.tail("worker"))
        deployment_id = stack.deployment("gym/gym")["id"]
        with Warehouse.open_reader(stack.warehouse) as wh:
            assert wh.rows(
                "SELECT flow_run_id, deployment_id, status FROM runs WHERE kind = 'gym'"
            ) == [(run_id, deployment_id, "completed")]
            assert wh.rows("SELECT gym_run_id, config_name, periods FROM gym_runs") == [
                (run_id, "gym-deploy", 3)
            ]
            assert (
                wh.scalar("SELECT count(*) FROM gym_answers WHERE policy = 'off'") == 2 * 2 * 4 * 4
            )  # systems × personas × positions × questions
    finally:
        stack.stop_all()
