"""Evaluation as Prefect tasks: loading a gated benchmark, building a memory system and retrieving for
every question (one task per system × persona), answering and judging (one task per system × k ×
persona, its LLM steps in bounded concurrent batches), and landing everything in one transaction.

Retrieval and answering are cached on their inputs, the code of the memory system (and of the
evaluation module) and the models bound to the roles, so a re-run makes no LLM call."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager

from prefect import Task, task
from prefect.cache_policies import INPUTS, NO_CACHE, TASK_SOURCE

from clonemem import runtime
from clonemem.evaluation import provenance, report
from clonemem.evaluation import stages as E
from clonemem.evaluation.diagnosis import judge_supports
from clonemem.evaluation.land import (
    Answers,
    EvaluationRun,
    Retrievals,
    content_digest,
    evaluation_rows,
    fingerprint,
    land_evaluation,
    system_stats,
)
from clonemem.evaluation.protocols import stages as protocol_stages
from clonemem.evaluation.protocols.answer import ProtocolOutcome, answer_protocols
from clonemem.evaluation.protocols.load import ProtocolData, load_protocol_data
from clonemem.evaluation.protocols.score import protocol_landing
from clonemem.evaluation.replay import fed_by_replay, replay_refused, retrieval_mode
from clonemem.evaluation.run import (
    Outcome,
    PersonaData,
    Retrieval,
    answer_and_judge,
    build_and_retrieve,
    load_benchmark,
)
from clonemem.evaluation.sample import quick_run
from clonemem.llm.types import CallRecord, Paid
from clonemem.memory import SYSTEMS, remote
from clonemem.memory.base import declared
from clonemem.schemas.config import FULL_CONTEXT_TOKENS, ConfigError, RunConfig
from clonemem.schemas.results import EvaluationResult
from clonemem.stages import STAGES
from clonemem.tasks.caching import (
    MemorySystemPolicy,
    StagePolicy,
    covered_stages,
    reply_memo,
    resume_token,
    transient_only,
)
from clonemem.tasks.context import flow_run_ids, new_run_id
from clonemem.warehouse import Warehouse
from clonemem.warehouse.catalog import require_gate_passed

EVAL_STAGES = (
    E.ANSWER_FREE.name,
    E.ANSWER_CHOICE.name,
    E.JUDGE.name,
    E.PRIVACY_RESPOND.name,
    E.PRIVACY_JUDGE.name,
)


@task(cache_policy=NO_CACHE, task_run_name="load {benchmark}")
def load_task(
    warehouse_path: str, benchmark: str, force: bool
) -> tuple[str, str, list[PersonaData]]:
    """The benchmark's id, name and personas (traces and questions), if it may be evaluated."""
    with Warehouse.open_reader(warehouse_path) as wh:
        bid, name = require_gate_passed(wh, benchmark, force)
        return bid, name, load_benchmark(wh, bid)


@task(
    cache_policy=INPUTS
    + TASK_SOURCE
    + MemorySystemPolicy(modules=("clonemem.evaluation.run",))
    + StagePolicy(stage_names=(E.SUPPORT.name,), modules=("clonemem.evaluation.diagnosis",)),
    persist_result=True,
    retries=1,
    retry_condition_fn=transient_only,
    task_run_name="retrieve {system} {persona.person_key}",
)
def retrieve_task(
    system: str,
    persona: PersonaData,
    k_max: int,
    full_context_tokens: int = FULL_CONTEXT_TOKENS,
    replay: bool = False,
    ks: tuple[int, ...] = (),
    resume: str | None = None,
) -> Paid[Retrieval]:
    """Build ``system`` from the persona's traces and retrieve for every question (time-aware), or, with
    ``replay`` (always for a remote system), feed it the traces in time order between the questions.
    ``full_context_tokens`` is the run's budget for the full-context baseline (an input: part of the key);
    ``ks`` the depths to be scored; ``resume``: a remote system's replies are kept under this token
    (:func:`resume_token`), so a resumed run does not ask again what an interrupted one was answered."""

    def body(rec: runtime.Recorder) -> Retrieval:
        model = rec.model("extractor")  # its own usage counter: the system's spend

        def usage() -> tuple[int, int]:
            return model.usage.calls, model.usage.input_tokens + model.usage.output_tokens

        return build_and_retrieve(
            system,
            persona,
            k_max,
            lambda name, inp: STAGES.get(name).run(model, inp),
            runtime.current().config.seed,
            usage,
            full_context_tokens,
            supports=judge_supports(rec.run, persona.language),
            replay=replay,
            ks=ks,
            memo=reply_memo(resume) if resume else None,
        )

    return runtime.paid(body, covers=covered_stages())


@task(
    cache_policy=INPUTS
    + TASK_SOURCE
    + StagePolicy(stage_names=EVAL_STAGES, modules=("clonemem.evaluation.run",)),
    persist_result=True,
    retries=1,
    retry_condition_fn=transient_only,
    task_run_name="answer {system} k={k} {persona.person_key}",
)
def answer_task(
    system: str, k: int, persona: PersonaData, retrieval: Retrieval
) -> Paid[list[Outcome]]:
    """The clone answers every question from the top-k memories; the judge scores the answers (the calls
    run in bounded concurrent batches through the provider layer, which keeps limits and retries)."""
    rt = runtime.current()
    waits = rt.model("answerer").api.waits or rt.model("judge").api.waits
    workers = (
        rt.config.evaluation.concurrency if waits else 1
    )  # computing calls gain nothing from threads
    return runtime.paid(
        lambda rec: answer_and_judge(system, k, persona, retrieval, rec.run, workers=workers),
        covers=covered_stages(),
    )


PROTOCOL_STAGES = tuple(s.name for s in protocol_stages.ALL)
ProtocolAnswers = Mapping[
    tuple[str, int, str], Sequence[ProtocolOutcome]
]  # (system, k, persona id)
PROTOCOL_MODULES = ("clonemem.evaluation.protocols.answer", "clonemem.evaluation.run")


@task(cache_policy=NO_CACHE, task_run_name="protocols of {benchmark_id}")
def protocol_data_task(
    warehouse_path: str, benchmark_id: str, configured: list[str] | None
) -> ProtocolData:
    """The standard protocols this evaluation computes (the importer's, adjusted by the config) and
    what they read of the benchmark."""
    with Warehouse.open_reader(warehouse_path) as wh:
        return load_protocol_data(wh, benchmark_id, configured)


@task(
    cache_policy=INPUTS
    + TASK_SOURCE
    + StagePolicy(stage_names=PROTOCOL_STAGES, modules=PROTOCOL_MODULES),
    persist_result=True,
    retries=1,
    retry_condition_fn=transient_only,
    task_run_name="protocol answers {system} k={k} {persona.person_key}",
)
def protocol_answer_task(
    system: str,
    k: int,
    persona: PersonaData,
    retrieval: Retrieval,
    data: ProtocolData,
    given: dict[str, str] | None = None,
    given_only: bool = False,
) -> Paid[list[ProtocolOutcome]]:
    """Each protocol's answer (its own answering prompt, over the same top-k memories) and judge
    label for every question of the persona; a predictions file's answers (``given``) stand for the
    answerers' (``given_only``: a question without one is left unscored)."""
    rt = runtime.current()
    waits = rt.model("answerer").api.waits or rt.model("judge").api.waits
    workers = rt.config.evaluation.concurrency if waits else 1

    def body(rec: runtime.Recorder) -> list[ProtocolOutcome]:
        return answer_protocols(
            system,
            k,
            persona,
            retrieval,
            data.questions,
            data.protocols,
            data.dates,
            rec.run,
            workers=workers,
            given=given,
            given_only=given_only,
        )

    return runtime.paid(body, covers=covered_stages())


@task(cache_policy=NO_CACHE, task_run_name="land evaluation {run.benchmark}")
def land_task(
    warehouse_path: str,
    run: EvaluationRun,
    personas: list[PersonaData],
    retrievals: Retrievals,
    answers: Answers,
    calls: Sequence[CallRecord],
    protocols: ProtocolData | None = None,
    protocol_answers: ProtocolAnswers | None = None,
    ranked: bool = True,
) -> EvaluationResult:
    """Per-question metrics, aggregates with bootstrap intervals (aggregated as the config says),
    efficiency, provenance and the standard protocols' scores; landed in one transaction — unless
    identical to the benchmark's latest stored evaluation (a re-run served from the cache): then
    that one stands for it (``reused``). ``ranked`` False: the retrievals rank nothing (a
    predictions file without rankings), so no protocol scores retrieval."""
    rows = evaluation_rows(run, personas, retrievals, answers)
    stats = system_stats(run.systems, personas, retrievals)
    ev = run.config.evaluation
    aggs = report.aggregates(
        rows.per_question,
        ev.bootstrap_samples,
        run.config.seed,
        by=ev.aggregate,
        exclude_no_evidence=ev.exclude_no_evidence,
    )
    prov = provenance.collect(run.systems, run.config, run.provenance, run.modes)
    landing = None
    if protocols is not None and protocols.names:
        landing = protocol_landing(
            protocols,
            run.systems,
            run.ks,
            personas,
            retrievals,
            answers,
            protocol_answers or {},
            ev.bootstrap_samples,
            run.config.seed,
            ev.ranking_depth,
            rank=ranked,
        )
    digest = fingerprint(run, personas, rows, stats, aggs, prov, protocols=landing)
    with Warehouse.open_writer(
        warehouse_path, bulk=True
    ) as wh:  # the rows reach the file as they land
        earlier = land_evaluation(
            wh, run, rows, stats, aggs, calls, provenance=prov, digest=digest, protocols=landing
        )
    result = report.evaluation_result(
        rows.per_question,
        aggs,
        stats,
        run.systems,
        run.ks,
        benchmark=run.benchmark,
        benchmark_id=run.benchmark_id,
        eval_run_id=earlier or run.eval_run_id,
        offline=run.offline,
        provenance=prov,
        reused=earlier is not None,
    )
    return result if landing is None else result.model_copy(update={"protocols": landing.result()})


def retrieval_depth(ks: Sequence[int], protocols: ProtocolData, cfg: RunConfig) -> int:
    """How deep systems retrieve: the largest k, or the ranking depth a retrieval-scoring protocol
    reads."""
    return max(max(ks), cfg.evaluation.ranking_depth) if protocols.ranks else max(ks)


# -- what a flow asks before and around the tasks ------------------------------------------------------


@contextmanager
def evaluated_systems(systems: Sequence[str], cfg: RunConfig) -> Iterator[list[str]]:
    """The labels of ``systems`` while the block runs. Remote systems (URL, NAME=URL, a name in
    [evaluation.remote]) are asked their /v1/info and registered under their label meanwhile; unknown
    names, and systems that may not be replayed when ``evaluation.replay`` is on, fail here, before any work."""
    with remote.registered(list(systems), cfg.evaluation) as labels:
        live = cfg.models.ref("extractor").provider != "offline"
        for name in labels:
            factory = SYSTEMS.get(name)
            refused = replay_refused(factory, live) if cfg.evaluation.replay else None
            if refused:
                raise ConfigError(refused)
        yield labels


def remote_resume(benchmark_id: str, renew: bool = False) -> str:
    """The token remote systems' replies are kept under in evaluations of ``benchmark_id`` until one finishes
    (``renew``: it finished; the next evaluation asks every server again)."""
    return resume_token(f"evaluate|{benchmark_id}", renew)


def cacheable(system: str) -> bool:
    """Whether ``system``'s retrievals may be served from the task cache (not a remote service's)."""
    return declared(SYSTEMS.get(system), "cacheable")


def retrieval_task(system: str) -> Task:
    """The retrieval task for ``system``: a system whose results may change without its code changing (a
    remote service) is never served from the cache, and is not retried as a whole (its calls are)."""
    if cacheable(system):
        return retrieve_task
    return retrieve_task.with_options(cache_policy=NO_CACHE, persist_result=False, retries=0)


def evaluation_run(
    benchmark_id: str,
    benchmark: str,
    systems: Sequence[str],
    ks: Sequence[int],
    force: bool,
    cfg: RunConfig,
    system_provenance: Mapping[str, Mapping[str, str]] | None = None,
    modes: Mapping[str, str] | None = None,
    content_hash: str | None = None,
    sample: Mapping[str, object] | None = None,
) -> EvaluationRun:
    """What identifies this evaluation, started now: its run id is the flow run's (one of its own outside
    Prefect); ``system_provenance`` is per system, what its class cannot carry (a results file's name and hash);
    ``modes`` per system how it was fed (default: each registered system's :func:`retrieval_mode`);
    ``content_hash`` the benchmark's content as evaluated; ``sample`` a quick run's questions."""
    flow_run_id, _ = flow_run_ids()
    if modes is None:
        modes = {s: retrieval_mode(SYSTEMS.get(s), cfg.evaluation.replay) for s in systems}
    return EvaluationRun(
        flow_run_id or new_run_id(),
        benchmark_id,
        benchmark,
        tuple(systems),
        tuple(ks),
        force,
        cfg,
        dt.datetime.now(dt.UTC).replace(tzinfo=None),
        flow_run_id,
        provenance=dict(system_provenance or {}),
        modes=dict(modes),
        content_hash=content_hash,
        sample=sample,
    )


def replayed(system: str, cfg: RunConfig) -> bool:
    """Whether ``system`` is fed by chronological replay in this run (``replay.fed_by_replay``)."""
    return fed_by_replay(SYSTEMS.get(system), cfg.evaluation.replay)


def questions_asked(
    personas: Sequence[PersonaData], limit: int | None, sample: int | None, seed: int
) -> tuple[list[PersonaData], str, dict[str, object] | None]:
    """The personas with the questions this run asks (all, or a quick run's), the digest of the whole
    benchmark's content, and the quick run's record (None for all questions)."""
    digest = content_digest(personas)
    try:
        asked, spec = quick_run(personas, limit, sample, seed)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    return asked, digest, None if spec is None else spec.model_dump()
