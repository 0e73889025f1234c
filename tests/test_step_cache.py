"""LLM steps are cached one by one without a Prefect task run each (issue: operations): a re-run reads
every step from the result store, a failure commits nothing, a permanent error is not retried, keys
follow inputs, code, templates and model bindings, and a run creates a handful of task runs, not one
per step."""

from __future__ import annotations

from pathlib import Path

import pytest
from prefect.filesystems import LocalFileSystem
from prefect.results import ResultStore

from clonemem import prompts, runtime
from clonemem.generation import stages as G
from clonemem.llm.types import PermanentError, TransientError
from clonemem.schemas.config import RunConfig
from clonemem.schemas.generation import PersonaSpec
from clonemem.tasks.caching import cached_step, step_key
from clonemem.tasks.generation import STEP_POLICY, run_stage
from clonemem.tasks.qa import ITEM_POLICY, run_qa_item


def _store(folder: Path) -> ResultStore:
    return ResultStore(
        result_storage=LocalFileSystem(basepath=str(folder)), cache_result_in_memory=False
    )


class Body:
    """A step body that fails with ``errors`` in turn, then returns its call count."""

    def __init__(self, *errors: Exception) -> None:
        self.errors, self.calls = list(errors), 0

    def __call__(self) -> dict:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return {"value": self.calls}


def test_a_step_runs_once_and_is_read_back_by_any_process_sharing_the_storage(
    tmp_path: Path,
) -> None:
    body = Body()
    assert cached_step("k1", body, _store(tmp_path)) == ({"value": 1}, False)
    assert cached_step("k1", body, _store(tmp_path)) == (
        {"value": 1},
        True,
    )  # a new store: another run
    assert body.calls == 1
    assert (tmp_path / "k1").is_file()  # a Prefect result record, where a task would persist it
    assert _store(tmp_path).read("k1").result == {"value": 1}


def test_a_failed_step_is_not_tried_again_its_calls_were_retried_by_their_wrapper(
    tmp_path: Path,
) -> None:
    # issue 31: a step that tried its body again on a transient error multiplied the wrapper's retries
    # (a stuck provider with max_retries = 1 got 6 requests for one call)
    store = _store(tmp_path)
    for name, error in (
        ("flaky", TransientError("503")),
        ("rejected", PermanentError("401: invalid key", status=401)),
        ("malformed", ValueError("malformed reply")),
    ):
        body = Body(error)
        with pytest.raises(type(error)):
            cached_step(name, body, store)
        assert body.calls == 1, name
        assert not store.exists(
            name
        )  # nothing of a failed step is stored: the next run tries it again
    assert cached_step("flaky", Body(), store) == ({"value": 1}, False)


def _keys(
    config: RunConfig,
    template_salt: str | None = None,
    monkeypatch: pytest.MonkeyPatch | None = None,
) -> dict:
    """The key of a generation step and of a stage-IV item under ``config`` (and, with ``template_salt``,
    an edited `persona` template)."""
    if template_salt is not None and monkeypatch is not None:
        real = prompts.template_hash
        monkeypatch.setattr(
            prompts,
            "template_hash",
            lambda name: real(name) + (template_salt if name == G.PERSONA.template else ""),
        )
    spec = PersonaSpec.model_validate(
        {
            "index": 0,
            "big_five": {
                t: 0.5
                for t in (
                    "openness",
                    "conscientiousness",
                    "extraversion",
                    "agreeableness",
                    "neuroticism",
                )
            },
            "language": "en",
            "timeline_start": "2024-01-01",
            "timeline_end": "2025-01-01",
        }
    )
    with runtime.use(runtime.Runtime(config)):
        return {
            "persona": step_key(
                run_stage,
                {"stage_name": G.PERSONA.name, "item": "persona", "inp": spec},
                STEP_POLICY,
            ),
            "other": step_key(
                run_stage,
                {
                    "stage_name": G.PERSONA.name,
                    "item": "persona",
                    "inp": spec.model_copy(update={"index": 1}),
                },
                STEP_POLICY,
            ),
            "qa": step_key(
                run_qa_item, {"segment": None, "question_type": "t", "rounds": 2}, ITEM_POLICY
            ),
        }


def test_keys_follow_inputs_models_seed_and_templates_of_their_own_stages(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    base = _keys(RunConfig())
    assert base == _keys(RunConfig())  # stable
    assert base["persona"] != base["other"]  # inputs
    generator = _keys(RunConfig.model_validate({"models": {"generator": "offline/other"}}))
    assert generator["persona"] != base["persona"] and generator["qa"] == base["qa"]
    writer = _keys(RunConfig.model_validate({"models": {"qa_writer": "offline/other"}}))
    assert writer["persona"] == base["persona"] and writer["qa"] != base["qa"]
    seeded = _keys(RunConfig(seed=8))
    assert (
        seeded["persona"] != base["persona"] and seeded["qa"] != base["qa"]
    )  # offline output depends on it
    edited = _keys(RunConfig(), "edited", monkeypatch)
    assert edited["persona"] != base["persona"] and edited["qa"] == base["qa"]


@pytest.mark.slow
@pytest.mark.prefect
def test_a_run_creates_a_few_task_runs_and_a_rerun_makes_no_call(tmp_path: Path) -> None:
    """Generation and stage IV of one tiny persona: hundreds of LLM steps, a handful of task runs."""
    import time
    import tomllib

    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

    from clonemem.flows.generation import generate_flow
    from clonemem.flows.qa import qa_flow
    from tests.pipeline_kit import TINY

    # a seed of its own: earlier tests of the session cached the tiny config's steps
    cfg = RunConfig.model_validate({**tomllib.loads(TINY.replace("{personas}", "1")), "seed": 9173})
    wh = str(tmp_path / "wh.duckdb")

    def task_runs(state) -> int:
        """The flow run's task runs once the server has stored them all (they arrive as events, in the
        background): the count after it stopped changing, with the landing task among them."""
        flt = FlowRunFilter(id=FlowRunFilterId(any_=[state.state_details.flow_run_id]))
        seen: list[int] = []
        with get_client(sync_client=True) as client:
            for _ in range(60):
                runs = client.read_task_runs(flow_run_filter=flt, limit=200)
                seen.append(len(runs))
                if any(r.name.startswith("land") for r in runs) and seen[-3:] == [len(runs)] * 3:
                    return len(runs)
                time.sleep(1)
        raise AssertionError(f"task runs still arriving: {seen}")

    first = generate_flow(wh, cfg, return_state=True)
    assert first.result().steps > 40 and first.result().cached_steps == 0
    assert (
        task_runs(first) <= 4
    )  # the benchmark row, the run row opened, the persona's landing, the run record
    qa = qa_flow(wh, cfg, return_state=True)
    assert (
        qa.result().llm_calls > 100 and task_runs(qa) <= 5
    )  # segments, the run row opened, landing, cue stats, run record

    again = generate_flow(wh, cfg, return_state=True)
    assert again.result().llm_calls == 0 and again.result().unchanged == 1
    assert again.result().cached_steps == again.result().steps == first.result().steps
    assert qa_flow(wh, cfg, return_state=True).result().llm_calls == 0
