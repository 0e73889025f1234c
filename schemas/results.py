"""What every flow returns: typed results that the CLI, the demo, the benchmarks and the tests read.

The evaluation result is also the `evaluate --json` contract: ``model_dump(mode="json")``
of :class:`EvaluationResult` is the file's content.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer

from clonemem.schemas.versions import EVALUATION

# -- metric names -------------------------------------------------------------------------

RECALLS = ("recall_flat", "recall_all_all", "recall_all_any", "recall_any_all", "recall_any_any")
JUDGED = ("qa_consistency", "qa_hallucination_rate", "qa_perfect_rate", "mem_recall", "mem_helpful")
METRICS = (*RECALLS, "choice_accuracy", *JUDGED)
EFFICIENCY = (
    "context_tokens",
    "build_seconds",
    "retrieval_p50_ms",
    "retrieval_p95_ms",
    "llm_calls",
    "llm_tokens",
    "write_coverage",
)
# Failure diagnosis (after AMemGym): each question's first failing step, as exclusive indicators.
DIAGNOSIS = ("write_failure", "read_failure", "utilization_failure", "correct")
# Privacy tasks (after LifeSide): any sensitive item disclosed (the violation rate), the share of sensitive
# items disclosed, and the share of necessary items conveyed (completeness); None for other questions.
PRIVACY = ("privacy_violation", "privacy_leak_share", "privacy_completeness")
AGGREGATED = (
    *METRICS,
    *DIAGNOSIS,
    *PRIVACY,
)  # what is aggregated per question, with bootstrap intervals
# The field's standard protocols: LoCoMo's F1, mem0's F1 / BLEU-1 / judge, LongMemEval's judged
# accuracy and retrieval scores, PersonaMem's multiple-choice accuracy.
PROTOCOL_METRICS = ("f1", "bleu1", "judge", "accuracy", "recall_any", "recall_all", "ndcg_any")


class _R(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


# -- generation -------------------------------------------------------------------------------------


class StageFailure(_R):
    """An LLM step that kept failing; the persona went on without that item."""

    persona: str
    stage: str
    item: str
    error: str


class GenerationResult(_R):
    benchmark_id: str
    name: str
    personas: int
    landed: int
    unchanged: int
    traces: int
    evidence: int
    detailed_events: int
    llm_calls: int
    failures: tuple[StageFailure, ...] = ()
    dropped: tuple[str, ...] = ()
    seconds: float = 0.0
    run_id: str | None = None
    steps: int = 0  # LLM steps the personas needed
    cached_steps: int = 0  # of which served from Prefect's cache

    def summary(self) -> str:
        return (
            f"generation: {self.landed + self.unchanged}/{self.personas} personas ({self.landed} landed, "
            f"{self.unchanged} unchanged), {self.traces} traces, {self.evidence} evidence; {self.steps} steps, "
            f"{self.cached_steps} from cache, {self.llm_calls} LLM calls, {len(self.failures)} failed items; "
            f"{self.seconds:.1f} s"
        )

    @property
    def generated(self) -> int:
        """Personas present after the run (landed now or unchanged since an earlier run)."""
        return self.landed + self.unchanged


class PersonaBundleResult(_R):
    """One persona generated into a bundle (scale-out)."""

    persona_id: str | None
    bundle: str
    failures: int


# -- stage IV ---------------------------------------------------------------------------------------


class CueStats(_R):
    """Superficial cues over accepted multiple-choice items (chance: 0.25 among A–D)."""

    items: int
    items_correct_in_a_to_d: int
    longest_option_accuracy: float | None
    overlap_option_accuracy: float | None
    correct_letter_distribution: dict[str, int]


class FailedItem(_R):
    segment: str
    type: str
    error: str


class FunnelRow(_R):
    """Quality control of one question type in one dimension: candidates → written → accepted."""

    question_type: str
    dimension: str
    candidates: int  # (segment, type) pairs tried
    infeasible: int  # the planner found no meaningful question
    failed: int  # an LLM step kept failing
    written: int
    rejected_format: int
    rejected_sufficiency: int
    rejected_distractors: int  # never passed the distractor validation loop
    accepted: int


class QAResult(_R):
    benchmark_id: str
    status: dict[str, int]  # accepted / rejected / infeasible
    rejected_by: dict[str, int]  # the quality-control stage that rejected
    by_type: dict[str, int]  # accepted items per question type
    by_dimension: dict[str, int]
    failed_items: tuple[FailedItem, ...]
    landed: int  # personas whose stage-IV output changed
    rejection_rate: float | None
    cues: CueStats
    llm_calls: int
    funnel: tuple[FunnelRow, ...] = ()
    cached_items: int = 0  # candidate items served from Prefect's cache
    seconds: float = 0.0

    @property
    def accepted(self) -> int:
        return self.status.get("accepted", 0)

    def summary(self) -> str:
        return (
            f"stage IV: {self.accepted} accepted, {self.status.get('rejected', 0)} rejected (rate "
            f"{self.rejection_rate}), {self.status.get('infeasible', 0)} infeasible, {len(self.failed_items)} "
            f"failed; {self.cached_items} items from cache, {self.llm_calls} LLM calls; cues: longest "
            f"{self.cues.longest_option_accuracy}, overlap {self.cues.overlap_option_accuracy} (chance 0.25); "
            f"{self.seconds:.1f} s"
        )


# -- the gate ---------------------------------------------------------------------------------------


@dataclass
class ExpectationOutcome:
    suite: str
    expectation: str
    success: bool
    observed: Any
    unexpected_count: int | None
    failing_sample: list[dict] = field(default_factory=list)


@dataclass
class GateResult:
    """The gate's verdict on one benchmark (`clonemem/expectations/gate.py` runs it), with every outcome."""

    gate_run_id: str
    benchmark_id: str
    name: str
    status: str  # passed, failed
    outcomes: list[ExpectationOutcome]
    data_docs: str | None
    params: dict[str, Any]

    @property
    def failed(self) -> list[ExpectationOutcome]:
        return [o for o in self.outcomes if not o.success]

    def describe_failures(self) -> list[str]:
        return [
            f"{o.suite}: {o.expectation} (unexpected: {o.unexpected_count})" for o in self.failed
        ]


class GateFailed(RuntimeError):
    """The benchmark failed the gate: it is stored with status `failed` and evaluation refuses it."""

    def __init__(self, result: GateResult, pipeline: Any = None) -> None:
        failed = "; ".join(result.describe_failures())
        super().__init__(
            f"benchmark {result.name!r} failed the gate ({len(result.failed)}/{len(result.outcomes)} "
            f"expectations unmet: {failed}); evaluate it anyway with --force (deployment parameter "
            "`force: true`)"
        )
        self.result = result
        self.pipeline = (
            pipeline  # what the pipeline did before the gate (a PipelineResult), when it ran one
        )

    def __reduce__(self) -> tuple:
        return (GateFailed, (self.result, self.pipeline))


# -- evaluation -------------------------------------------------------------------------------------


class Diagnosis(_R):
    """Shares of questions whose first failing step is writing, reading or using the memory (they sum
    to 1 over the questions it could be decided for: ``n``), with 95% bootstrap intervals."""

    write_failure: float | None = None
    read_failure: float | None = None
    utilization_failure: float | None = None
    correct: float | None = None
    n: int = 0
    ci: dict[str, list[float] | None] = Field(default_factory=dict)


class PrivacyScores(_R):
    """Over the privacy tasks scored (``n``): the share with any sensitive item disclosed (violation, lower
    is better), the share of sensitive items disclosed, and the share of necessary items conveyed
    (completeness, over the tasks that have any), with 95% bootstrap intervals."""

    privacy_violation: float | None = None
    privacy_leak_share: float | None = None
    privacy_completeness: float | None = None
    n: int = 0
    ci: dict[str, list[float] | None] = Field(default_factory=dict)


class Scores(_R):
    """Every metric of ``METRICS`` for one (system, k) over ``n_questions``, each with its 95% bootstrap
    interval (``<metric>_ci``); None where not computed. ``tests/test_results_contract.py`` holds these
    fields to the metric list."""

    system: str
    k: int
    n_questions: int
    recall_flat: float | None = None
    recall_flat_ci: list[float] | None = None
    recall_all_all: float | None = None
    recall_all_all_ci: list[float] | None = None
    recall_all_any: float | None = None
    recall_all_any_ci: list[float] | None = None
    recall_any_all: float | None = None
    recall_any_all_ci: list[float] | None = None
    recall_any_any: float | None = None
    recall_any_any_ci: list[float] | None = None
    choice_accuracy: float | None = None
    choice_accuracy_ci: list[float] | None = None
    qa_consistency: float | None = None
    qa_consistency_ci: list[float] | None = None
    qa_hallucination_rate: float | None = None
    qa_hallucination_rate_ci: list[float] | None = None
    qa_perfect_rate: float | None = None
    qa_perfect_rate_ci: list[float] | None = None
    mem_recall: float | None = None
    mem_recall_ci: list[float] | None = None
    mem_helpful: float | None = None
    mem_helpful_ci: list[float] | None = None


class SystemScores(Scores):
    """One (system, k) of the leaderboard: the metrics, efficiency and the failure diagnosis (an entry of
    ``evaluate --json``'s ``results``)."""

    context_tokens: float | None = None
    build_seconds: float | None = None
    retrieval_p50_ms: float | None = None
    retrieval_p95_ms: float | None = None
    llm_calls: int | None = None
    llm_tokens: int | None = None
    write_coverage: float | None = None
    diagnosis: Diagnosis = Diagnosis()
    privacy: PrivacyScores = PrivacyScores()


class TypeScores(Scores):
    """The same metrics for one question type of one (system, k) (``by_question_type``)."""

    question_type: str
    diagnosis: Diagnosis = Diagnosis()
    privacy: PrivacyScores = PrivacyScores()


class AggregationSettings(_R):
    """How per-question scores became the figures: over questions or as the mean of persona means, and
    whether recall left out questions without evidence (the paper: ``personas`` and ``True``)."""

    aggregate: Literal["questions", "personas"] = "questions"
    exclude_no_evidence: bool = False


class SystemProvenance(_R):
    """One memory system as evaluated: the hash of its code, the model bound to each LLM stage it
    declares, and what it adds itself (``MemorySystem.provenance_extra``: a results file's hash; a remote
    system's ``url``, ``/v1/info`` ``name``, ``version``, ``features`` and the ``protocol`` version spoken)."""

    system: str
    code_hash: str | None = (
        None  # None: code that is not here (a remote system: known by its extra fields)
    )
    llm_stages: dict[str, str] = Field(
        default_factory=dict
    )  # stage name -> "provider/model" of its role
    extra: dict[str, str] = Field(default_factory=dict)
    # how it was fed: ``replay`` (each question's answer from what it was given up to that question's
    # date), ``in_process`` (the whole history at once, the retriever filtering by date); None for a
    # result written before evaluations recorded it (format 1.0)
    retrieval_mode: Literal["replay", "in_process"] | None = None


class Provenance(_R):
    """Where an evaluation's numbers came from. ``git_commit`` is None when not run from a checkout."""

    project_version: str | None = None
    git_commit: str | None = None
    git_dirty: bool | None = None  # the checkout had uncommitted changes
    answerer: str
    judge: str
    packages: dict[str, str | None] = Field(
        default_factory=dict
    )  # distribution -> version (None: absent)
    systems: list[SystemProvenance] = Field(default_factory=list)
    aggregation: AggregationSettings = AggregationSettings()

    def system(self, name: str) -> SystemProvenance | None:
        return next((s for s in self.systems if s.system == name), None)

    def differences(self, other: Provenance, systems: list[str] | None = None) -> list[str]:
        """What differs between two evaluations, one line each (``systems``: only those systems)."""
        out = [
            f"{label}: {a} → {b}"
            for label, a, b in (
                ("project version", self.project_version, other.project_version),
                ("git commit", self.git_commit, other.git_commit),
                ("answerer", self.answerer, other.answerer),
                ("judge", self.judge, other.judge),
                ("aggregation", _agg(self.aggregation), _agg(other.aggregation)),
            )
            if a != b
        ]
        out += [
            f"package {p}: {self.packages.get(p)} → {other.packages.get(p)}"
            for p in sorted(set(self.packages) | set(other.packages))
            if self.packages.get(p) != other.packages.get(p)
        ]
        names = (
            systems
            if systems is not None
            else sorted({s.system for s in (*self.systems, *other.systems)})
        )
        for name in names:
            a, b = self.system(name), other.system(name)
            if a is None or b is None:
                continue  # a system in one evaluation only is no provenance difference
            if a.code_hash != b.code_hash:
                out.append(f"{name} code: {a.code_hash} → {b.code_hash}")
            for stage in sorted(set(a.llm_stages) | set(b.llm_stages)):
                if a.llm_stages.get(stage) != b.llm_stages.get(stage):
                    out.append(
                        f"{name} {stage}: {a.llm_stages.get(stage)} → {b.llm_stages.get(stage)}"
                    )
            for key in sorted(set(a.extra) | set(b.extra)):
                if a.extra.get(key) != b.extra.get(key):
                    out.append(f"{name} {key}: {a.extra.get(key)} → {b.extra.get(key)}")
        return out


def _agg(a: AggregationSettings) -> str:
    return f"{a.aggregate}{', no-evidence left out' if a.exclude_no_evidence else ''}"


class ProtocolRow(_R):
    """One group of one standard protocol for one (system, k) (an entry of ``evaluate --json``'s
    ``protocols``): the mean of each of the protocol's metrics over the group's scored questions
    with its 95% bootstrap interval (``<metric>_ci``). ``group`` is a LoCoMo category by name (its
    number in ``category``), a question type, ``overall``, ``overall_with_adversarial``,
    ``task_average``, ``abstention`` or ``non_abstention``; ``granularity`` is set on LongMemEval's
    retrieval rows, whose ``k`` is the retrieval cut-off (elsewhere ``k`` is the evaluation's). A
    metric the protocol does not report, and ``category`` / ``granularity`` when not set, are left
    out of the JSON."""

    protocol: str
    protocol_version: str
    system: str
    k: int
    group: str
    n: int  # questions in the group
    category: int | None = None
    eval_run_id: str | None = None  # set when read from the warehouse (rows of several evaluations)
    granularity: Literal["turn", "session"] | None = None
    f1: float | None = None
    f1_ci: list[float] | None = None
    bleu1: float | None = None
    bleu1_ci: list[float] | None = None
    judge: float | None = None
    judge_ci: list[float] | None = None
    accuracy: float | None = None
    accuracy_ci: list[float] | None = None
    recall_any: float | None = None
    recall_any_ci: list[float] | None = None
    recall_all: float | None = None
    recall_all_ci: list[float] | None = None
    ndcg_any: float | None = None
    ndcg_any_ci: list[float] | None = None

    @model_serializer(mode="wrap")
    def _present(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        out: dict[str, Any] = handler(self)
        for key in ("category", "granularity", "eval_run_id"):
            if out.get(key) is None:
                out.pop(key, None)
        for metric in PROTOCOL_METRICS:
            if out.get(metric) is None and out.get(f"{metric}_ci") is None:
                out.pop(metric, None)
                out.pop(f"{metric}_ci", None)
        return out

    def value(self, metric: str) -> float | None:
        got = getattr(self, metric, None)
        return got if isinstance(got, float) else None

    @classmethod
    def merged(cls, records: Iterable[Mapping[str, Any]]) -> list[ProtocolRow]:
        """Rows from per-metric records (the columns of ``eval_protocol_metrics``: protocol,
        protocol_version, system, k, granularity — ``qa`` for answer scores —, group_name,
        category, metric, n, value, ci_low, ci_high, and optionally eval_run_id), one per group, in
        the records' order."""
        rows: dict[tuple, dict[str, Any]] = {}
        for r in records:
            eid, gran = r.get("eval_run_id"), r["granularity"]
            key = (eid, r["protocol"], r["system"], r["k"], gran, r["group_name"])
            row = rows.setdefault(
                key,
                {
                    "eval_run_id": eid,
                    "protocol": r["protocol"],
                    "protocol_version": r["protocol_version"],
                    "system": r["system"],
                    "k": r["k"],
                    "group": r["group_name"],
                    "n": 0,
                    "category": r["category"],
                    "granularity": None if gran == "qa" else gran,
                },
            )
            row["n"] = max(row["n"], r["n"])
            if r["metric"] in PROTOCOL_METRICS:
                row[r["metric"]] = r["value"]
                low, high = r["ci_low"], r["ci_high"]
                row[f"{r['metric']}_ci"] = None if low is None or high is None else [low, high]
        return [cls.model_validate(row) for row in rows.values()]


class EvaluationResult(_R):
    format_version: str = (
        EVALUATION.version
    )  # of the `evaluate --json` document (schemas/versions.py)
    benchmark: str
    benchmark_id: str
    eval_run_id: str
    offline: bool  # the answerer or the judge ran on the offline provider
    results: list[SystemScores]
    by_question_type: list[TypeScores]
    seconds: float = 0.0
    provenance: Provenance | None = None  # None only for results built outside an evaluation run
    # identical (inputs, provenance and results) to the benchmark's latest stored evaluation, which made no new
    # call: not stored again; ``eval_run_id`` is that earlier evaluation's
    reused: bool = False
    # the benchmark's standard protocols, one row per (protocol, system, k, granularity, group)
    protocols: list[ProtocolRow] = Field(default_factory=list)

    def scores(self, system: str, k: int) -> Any:
        return next(r for r in self.results if r.system == system and r.k == k)

    def summary(self) -> str:
        systems = sorted({r.system for r in self.results})
        return (
            f"evaluation of {self.benchmark!r}: {len(systems)} systems × k {sorted({r.k for r in self.results})}, "
            f"{self.results[0].n_questions if self.results else 0} questions; {self.seconds:.1f} s"
        )


# -- imports and the whole pipeline -----------------------------------------------------------------


class ExportResult(_R):
    folder: str
    files: tuple[str, ...]


class PipelineResult(_R):
    """The `pipeline` flow: generation → QA → gate → evaluation → export, each part's own result."""

    benchmark_id: str
    name: str
    generation: GenerationResult
    qa: QAResult
    gate_status: str
    gate_failed: tuple[str, ...] = Field(
        default=(), description="failed expectations, when the gate failed"
    )
    evaluation: EvaluationResult | None = None
    export: ExportResult | None = None
    seconds: float = 0.0
