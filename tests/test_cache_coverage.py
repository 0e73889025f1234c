"""A cached task's key covers every stage it runs: a memory system is keyed on the stages it declares
(`llm_stages`, read as declared), so a change of model, template or seed reaches its cached results;
and a call inside a cached task to a stage its key does not cover is refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from clonemem import prompts, runtime
from clonemem.llm.types import StageNotCovered
from clonemem.memory import SYSTEMS
from clonemem.schemas.config import RunConfig
from clonemem.stages import all_stages
from clonemem.tasks.caching import MemorySystemPolicy, StagePolicy, policy_stages


def _llm_systems() -> list[str]:
    return [n for n in SYSTEMS.names() if SYSTEMS.get(n).llm_stages]


def _key(system: str, config: RunConfig) -> str:
    with runtime.use(runtime.Runtime(config)):
        return MemorySystemPolicy().compute_key(None, {"system": system}, {})


def test_the_systems_that_call_models_are_all_here() -> None:
    assert {"mem0", "amem", "omem", "flat_combined", "flat_wo_org"} <= set(_llm_systems())


@pytest.mark.parametrize("system", _llm_systems())
def test_a_systems_key_follows_its_model_templates_and_seed(
    system: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = RunConfig()
    key = _key(system, base)
    assert _key(system, RunConfig()) == key  # stable

    stages = SYSTEMS.get(system).llm_stages
    for role in {
        s.role for s in stages
    }:  # the model bound to a stage's role (extractor for the built-ins)
        live = RunConfig.model_validate({"models": {role: "openai/gpt-4o-mini"}})
        assert _key(system, live) != key, (
            f"{system}: switching {role} to openai/gpt-4o-mini kept the key"
        )
    assert _key(system, RunConfig(seed=base.seed + 1)) != key  # offline answers depend on the seed

    source = prompts.template_source
    for stage in stages:  # editing any one of its templates
        monkeypatch.setattr(
            prompts,
            "template_source",
            lambda name, edited=stage.template: (
                source(name) + ("{# edited #}" if name == edited else "")
            ),
        )
        prompts.template_hash.cache_clear()
        assert _key(system, base) != key, f"{system}: editing {stage.template}.j2 kept the key"
        monkeypatch.setattr(prompts, "template_source", source)
        prompts.template_hash.cache_clear()
    assert _key(system, base) == key


def test_a_factory_without_llm_stages_is_an_error_not_no_stages() -> None:
    from clonemem.memory.flat import BM25

    def factory():
        return BM25()

    SYSTEMS.add("undeclared_toy", factory)
    try:
        with pytest.raises(TypeError, match="'undeclared_toy'.*no `llm_stages`"):
            _key("undeclared_toy", RunConfig())
    finally:
        SYSTEMS.remove("undeclared_toy", missing_ok=True)


def test_the_policies_say_what_they_cover() -> None:
    from prefect.cache_policies import INPUTS, NO_CACHE, TASK_SOURCE

    all_stages()
    mem0 = {s.name: s.role for s in SYSTEMS.get("mem0").llm_stages}
    policy = (
        INPUTS + TASK_SOURCE + MemorySystemPolicy() + StagePolicy(stage_names=("eval.support",))
    )
    assert policy_stages(policy, {"system": "mem0"}) == {**mem0, "eval.support": "judge"}
    assert policy_stages(INPUTS + StagePolicy(), {"stage_name": "generation.persona"}) == {
        "generation.persona": "generator"
    }
    assert policy_stages(INPUTS + TASK_SOURCE, {}) == {}  # cached, keyed on no stage: may call none
    assert policy_stages(NO_CACHE, {}) is None  # not cached: nothing to cover


def test_a_recorder_refuses_a_stage_outside_its_cover() -> None:
    from clonemem.evaluation import stages as E
    from clonemem.schemas.evaluation import SupportInput

    inp = SupportInput(
        statement="Mia joined the climbing club.", memories=["Mia joined the Harbor climbing club."]
    )
    with runtime.use(runtime.Runtime(RunConfig())):
        assert runtime.paid(
            lambda rec: rec.run(E.SUPPORT, inp), covers={E.SUPPORT.name: "judge"}
        ).value
        with pytest.raises(StageNotCovered, match="'eval.support'.*covers only eval.judge"):
            runtime.paid(lambda rec: rec.run(E.SUPPORT, inp), covers={E.JUDGE.name: "judge"})
        # keyed on the judge's model, run through the extractor's: refused too
        with pytest.raises(StageNotCovered, match="judge role's model, not the extractor role's"):
            runtime.paid(
                lambda rec: E.SUPPORT.run(rec.model("extractor"), inp),
                covers={E.SUPPORT.name: "judge"},
            )


TOY_SYSTEM = '''
from clonemem.evaluation import stages as E
from clonemem.memory.base import MemorySystem, Retrieved
from clonemem.schemas.evaluation import SupportInput


class JudgingRecall(MemorySystem):
    """Declares a judge-role stage, which the evaluation runs through the extractor's model."""

    name = "judging"
    llm_stages = (E.SUPPORT,)

    def build(self, traces, ctx):
        self.traces = list(traces)
        ctx.llm(E.SUPPORT.name, SupportInput(statement="a", memories=["a"]))

    def retrieve(self, question, k):
        return [Retrieved(t.content, (t.trace_id,)) for t in self.traces[:k]]
'''


@pytest.mark.slow
@pytest.mark.prefect
def test_inside_a_cached_task_an_uncovered_stage_call_fails(
    tmp_path: Path, demo_file: Path
) -> None:
    """The real retrieval task: without the support stage in its policy, its diagnosis's judge call is
    refused; and a system whose declared stage runs through another role's model is refused."""
    import sys
    import textwrap

    from prefect import flow
    from prefect.cache_policies import INPUTS, TASK_SOURCE

    from clonemem.evaluation.run import load_benchmark
    from clonemem.importers import import_files
    from clonemem.tasks.evaluation import retrieve_task
    from clonemem.warehouse import Warehouse

    with Warehouse.open_writer(tmp_path / "wh.duckdb") as wh:
        import_files(wh, "release", [demo_file], "x")
        persona = load_benchmark(wh, wh.scalar("SELECT benchmark_id FROM benchmarks"))[0]
    (tmp_path / "toyjudging.py").write_text(textwrap.dedent(TOY_SYSTEM))
    sys.path.insert(0, str(tmp_path))
    narrowed = retrieve_task.with_options(
        cache_policy=INPUTS + TASK_SOURCE + MemorySystemPolicy(), retries=0
    )

    @flow
    def attempt(task, system: str) -> BaseException | str:
        with runtime.use(runtime.Runtime(RunConfig())):
            state = task(system, persona, 3, return_state=True)
            try:
                state.result()
            except Exception as exc:
                return exc
            return state.name

    try:
        assert (
            attempt(retrieve_task, "bm25") == "Completed"
        )  # the task as defined covers what it runs
        got = attempt(narrowed, "flat_combined")  # its summaries are judged for the diagnosis
        assert isinstance(got, StageNotCovered) and "'eval.support'" in str(got)
        got = attempt(retrieve_task, "toyjudging:JudgingRecall")
        assert isinstance(got, StageNotCovered) and "not the extractor role's" in str(got)
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("toyjudging", None)
        SYSTEMS.remove("toyjudging:JudgingRecall", missing_ok=True)
