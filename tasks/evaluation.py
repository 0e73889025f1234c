"""Evaluation as Prefect tasks: building a memory system and retrieving for every question (one
task per system × persona), answering and judging (one task per system × k × persona). Cached on
their inputs, the code of the memory systems and the models bound to the roles."""

from __future__ import annotations

from prefect import task
from prefect.cache_policies import INPUTS, TASK_SOURCE

from clonemem import runtime
from clonemem.evaluation.run import Outcome, PersonaData, Retrieval, answer_and_judge, build_and_retrieve
from clonemem.llm.model import get_model
from clonemem.stages import STAGES
from clonemem.tasks.caching import StagePolicy
from clonemem.tasks.generation import _transient_only

MEMORY_CODE = ("clonemem.memory.base", "clonemem.memory.simple", "clonemem.memory.flat", "clonemem.memory.embed",
               "clonemem.memory.mem0", "clonemem.memory.amem", "clonemem.memory.omem", "clonemem.evaluation.run")


@task(cache_policy=INPUTS + TASK_SOURCE + StagePolicy(stage_prefix="memory.", modules=MEMORY_CODE),
      persist_result=True, retries=1, retry_condition_fn=_transient_only, task_run_name="retrieve {system} {persona.person_key}")
def retrieve_task(system: str, persona: PersonaData, k_max: int) -> Retrieval:
    """Build ``system`` from the persona's traces and retrieve for every question (time-aware)."""
    rt = runtime.current()
    model = get_model(rt.config, "extractor", sink=rt.sink, run_id=rt.run_id)  # its own usage counter

    def llm(stage_name: str, inp):  # noqa: ANN001, ANN202
        return STAGES.get(stage_name).run(model, inp)

    def usage() -> tuple[int, int]:
        return model.usage.calls, model.usage.input_tokens + model.usage.output_tokens

    return build_and_retrieve(system, persona, k_max, llm, rt.config.seed, usage)


@task(cache_policy=INPUTS + TASK_SOURCE + StagePolicy(stage_prefix="eval.", modules=("clonemem.evaluation.run",)),
      persist_result=True, retries=1, retry_condition_fn=_transient_only,
      task_run_name="answer {system} k={k} {persona.person_key}")
def answer_task(system: str, k: int, persona: PersonaData, retrieval: Retrieval) -> list[Outcome]:
    """The clone answers every question from the top-k memories; the judge scores the answers."""
    rt = runtime.current()
    return answer_and_judge(system, k, persona, retrieval, lambda stage, inp: stage.run(rt.model(stage.role), inp))
