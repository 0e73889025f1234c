"""Scoring a results file as Prefect tasks: reading it against the benchmark, the read diagnosis of its
items (the judge's support check, cached like a built-in's retrieval), and answering and judging with the
file's own choices and answers where it gives them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from prefect import task
from prefect.cache_policies import INPUTS, NO_CACHE, TASK_SOURCE

from clonemem import runtime
from clonemem.evaluation import stages as E
from clonemem.evaluation.diagnosis import judge_supports
from clonemem.evaluation.land import EvaluationRun, content_digest
from clonemem.evaluation.names import refuse_reuse
from clonemem.evaluation.predictions import given_texts, ranked_any, read_predictions
from clonemem.evaluation.results_file import (
    FileRetrieval,
    ResolvedFile,
    file_ks,
    file_retrieval,
    given_answers,
    read_and_resolve,
)
from clonemem.evaluation.run import Outcome, PersonaData, Retrieval, answer_and_judge
from clonemem.llm.types import Paid
from clonemem.memory import SYSTEMS
from clonemem.schemas.config import RunConfig
from clonemem.schemas.names import checked_name
from clonemem.schemas.results_file import ResultsFileError
from clonemem.tasks.caching import StagePolicy, covered_stages, transient_only
from clonemem.tasks.evaluation import EVAL_STAGES, evaluation_run
from clonemem.warehouse import Warehouse

# what the flow reads of a resolved file (the orchestration layer may not import the domain)
__all__ = ["given_texts", "ranked_any"]

MODULES = (
    "clonemem.evaluation.run",
    "clonemem.evaluation.diagnosis",
    "clonemem.evaluation.results_file",
)


def check_system_name(name: str) -> None:
    """A file's system has a name that can be typed again (:func:`checked_name`), apart from the registered
    ones (its results must not pass for theirs)."""
    checked_name(name, "--name")
    if name in SYSTEMS.names():
        raise ResultsFileError(
            f"--name {name!r} is a registered memory system: name the file's system otherwise"
        )


def check_name_reuse(
    warehouse_path: str,
    benchmark_id: str,
    benchmark: str,
    resolved: ResolvedFile,
    name: str,
    replace: bool,
) -> None:
    """Refuse to store the file's results under a name that already holds another file's (or a remote
    system's) on the benchmark, unless ``replace`` (:func:`clonemem.evaluation.names.refuse_reuse`)."""
    with Warehouse.open_reader(warehouse_path) as wh:
        refuse_reuse(wh, benchmark_id, benchmark, name, resolved.provenance, "--name", replace)


def file_run(
    benchmark_id: str,
    benchmark: str,
    name: str,
    resolved: ResolvedFile,
    ks: Sequence[int] | None,
    force: bool,
    cfg: RunConfig,
    personas: Sequence[PersonaData] = (),
) -> EvaluationRun:
    """The evaluation that scores ``resolved`` as the system ``name``, at the k values it may be scored at
    (see :func:`file_ks`), with the file's name and sha256 as the system's provenance. Its mode is
    `replay`: a results file's retrievals are, by the format's contract, each made from the traces dated
    at or before its question (as ``export-retrievals`` writes them, and as a replayed system makes them)."""
    return evaluation_run(
        benchmark_id,
        benchmark,
        (name,),
        file_ks(resolved, ks),
        force,
        cfg,
        system_provenance={name: dict(resolved.provenance)},
        modes={name: "replay"},
        content_hash=content_digest(personas) if personas else None,
    )


@task(cache_policy=NO_CACHE, task_run_name="read results file {path}")
def read_results_task(
    warehouse_path: str, benchmark_id: str, path: str, allow_missing: bool
) -> ResolvedFile:
    """Every line checked and mapped to the benchmark's ids, or the first problem as an error."""
    with Warehouse.open_reader(warehouse_path) as wh:
        return read_and_resolve(wh, benchmark_id, path, allow_missing)


@task(cache_policy=NO_CACHE, task_run_name="read predictions file {path}")
def read_predictions_task(
    warehouse_path: str,
    benchmark_id: str,
    path: str,
    fmt: str,
    key: str | None,
    allow_missing: bool,
) -> ResolvedFile:
    """Another harness's predictions in a benchmark's layout, mapped to the benchmark's ids, or the
    first problem as an error."""
    with Warehouse.open_reader(warehouse_path) as wh:
        return read_predictions(wh, benchmark_id, path, fmt, key, allow_missing)


@task(
    cache_policy=INPUTS + TASK_SOURCE + StagePolicy(stage_names=(E.SUPPORT.name,), modules=MODULES),
    persist_result=True,
    retries=1,
    retry_condition_fn=transient_only,
    task_run_name="read {system} {persona.person_key}",
)
def file_retrieve_task(
    system: str, persona: PersonaData, lines: Mapping[str, FileRetrieval]
) -> Paid[Retrieval]:
    """The file's items as the persona's retrieval, with each question's read diagnosis."""
    return runtime.paid(
        lambda rec: file_retrieval(
            system, persona, lines, judge_supports(rec.run, persona.language)
        ),
        covers=covered_stages(),
    )


@task(
    cache_policy=INPUTS + TASK_SOURCE + StagePolicy(stage_names=EVAL_STAGES, modules=MODULES),
    persist_result=True,
    retries=1,
    retry_condition_fn=transient_only,
    task_run_name="answer {system} k={k} {persona.person_key}",
)
def file_answer_task(
    system: str,
    k: int,
    persona: PersonaData,
    retrieval: Retrieval,
    lines: Mapping[str, FileRetrieval],
) -> Paid[list[Outcome]]:
    """The file's choices and answers where given, the answerer's otherwise; the judge scores every answer."""
    rt = runtime.current()
    workers = (
        rt.config.evaluation.concurrency
        if (rt.model("answerer").api.waits or rt.model("judge").api.waits)
        else 1
    )
    return runtime.paid(
        lambda rec: answer_and_judge(
            system, k, persona, retrieval, rec.run, workers=workers, given=given_answers(lines)
        ),
        covers=covered_stages(),
    )
