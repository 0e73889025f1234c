"""Scoring memory systems on a benchmark: load, build and retrieve, answer and judge, measure.

Plain functions over typed records; ``flows/evaluation.py`` runs them as cached Prefect tasks.
"""

from __future__ import annotations

import datetime as dt
import json
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple

import numpy as np

from clonemem import privacy, progress
from clonemem.evaluation import metrics as M
from clonemem.evaluation import stages as E
from clonemem.evaluation.diagnosis import EvidenceDiagnosis, Supports, diagnose_question, verdict
from clonemem.evaluation.replay import Replay, schedule
from clonemem.llm.types import LLMError, ProviderRejected, StageNotCovered, about, estimate_tokens
from clonemem.memory import SYSTEMS
from clonemem.memory.base import (
    Attachment,
    BuildContext,
    MemoryTrace,
    QuestionView,
    declared,
    declared_only,
)
from clonemem.memory.coverage import write_coverage
from clonemem.memory.errors import MemorySystemFailed
from clonemem.schemas.config import FULL_CONTEXT_TOKENS
from clonemem.schemas.evaluation import (
    AnswerInput,
    JudgeInput,
    PrivacyJudgeInput,
    PrivacyRespondInput,
)
from clonemem.schemas.qa import Choice
from clonemem.schemas.results import DIAGNOSIS, PRIVACY
from clonemem.warehouse import Warehouse
from clonemem.warehouse.content import relation_names


@dataclass(frozen=True)
class PrivacyTask:
    """A privacy task's boundary: who asks, why, what to convey (necessary) and what to keep (sensitive)."""

    recipient: str
    purpose: str
    tactic: str | None
    necessary: tuple[str, ...]  # statements
    sensitive: tuple[str, ...]
    necessary_ids: tuple[str, ...] = ()  # their evidence ids, in the same order
    sensitive_ids: tuple[str, ...] = ()


@dataclass(frozen=True)
class EvalQuestion:
    question_id: str
    persona_id: str
    question: str
    question_type: str
    dimension: str
    question_time: dt.datetime
    answer: str
    correct_choice_id: str | None
    choices: tuple[Choice, ...]
    evidence_sets: tuple[tuple[str, ...], ...]  # each evidence item's trace ids
    statements: tuple[str, ...]
    privacy: PrivacyTask | None = None
    # what an imported source said beyond the project's fields (the standard protocols read them)
    source_category: str | None = None  # LoCoMo '1'..'5'; LongMemEval / PersonaMem question_type
    evidence_sessions: tuple[
        str, ...
    ] = ()  # session keys holding the answer (LongMemEval answer_session_ids)

    def view(self) -> QuestionView:
        gold = tuple(dict.fromkeys(t for s in self.evidence_sets for t in s))
        return QuestionView(
            self.question_id,
            self.question,
            self.question_time,
            gold,
            tuple(zip(self.statements, self.evidence_sets)),
            recipient=self.privacy.recipient if self.privacy else None,
        )


@dataclass(frozen=True)
class PersonaData:
    persona_id: str
    person_key: str
    name: str
    language: str
    traces: tuple[MemoryTrace, ...]
    questions: tuple[EvalQuestion, ...]
    # What a system outside this process is told (the release format's ids, never warehouse ids): the
    # persona's id (its release ``person_id``; with ``@language`` when the benchmark has that person in
    # several languages), and each trace's and question's release ``id`` by warehouse id.
    public_id: str = ""
    release_ids: dict[str, str] = field(default_factory=dict)


def load_benchmark(wh: Warehouse, benchmark_id: str) -> list[PersonaData]:
    out = []
    keys = Counter(
        k
        for (k,) in wh.rows(
            "SELECT person_key FROM personas WHERE benchmark_id = ?", [benchmark_id]
        )
    )
    for pid, key, name, language in wh.rows(
        "SELECT persona_id, person_key, person_name, coalesce(language, 'en') "
        "FROM personas WHERE benchmark_id = ? ORDER BY seq",
        [benchmark_id],
    ):
        names = relation_names(wh, pid)
        traces = tuple(
            MemoryTrace(
                t, m, d, c, tuple(privacy.trace_reach(r, a, m, names)), sk, sp, sd, _attachments(at)
            )
            for t, m, d, c, a, r, sk, sp, sd, at in wh.rows(
                "SELECT trace_id, medium, event_date, content, audience, reached, session_key, speaker, session_date, "
                "attachments::VARCHAR FROM v_traces WHERE persona_id = ? ORDER BY event_date, trace_id",
                [pid],
            )
        )
        tasks = privacy_tasks(wh, pid)
        questions = []
        for qid, q, qtype, dim, qtime, ans, correct, choices, ev, category, sessions in wh.rows(
            "SELECT q.question_id, q.question, q.question_type, q.dimension, q.question_time, q.answer, q.correct_choice_id, "
            " coalesce((SELECT list({'id': c.choice_id, 'text': c.text} ORDER BY c.seq) FROM question_choices c "
            "           WHERE c.question_id = q.question_id), []), "
            " coalesce((SELECT list({'statement': e.statement, 'ids': coalesce((SELECT list(et.trace_id ORDER BY et.seq) "
            "           FROM evidence_traces et WHERE et.evidence_id = e.evidence_id), [])} ORDER BY qe.seq) "
            "           FROM question_evidence qe JOIN evidence e USING (evidence_id) WHERE qe.question_id = q.question_id), []), "
            " q.source_category, q.evidence_sessions::VARCHAR "
            "FROM questions q WHERE q.persona_id = ? ORDER BY q.seq",
            [pid],
        ):
            questions.append(
                EvalQuestion(
                    qid,
                    pid,
                    q,
                    qtype,
                    dim,
                    qtime,
                    ans,
                    correct,
                    tuple(Choice(id=c["id"], text=c["text"]) for c in choices),
                    tuple(tuple(e["ids"]) for e in ev),
                    tuple(e["statement"] for e in ev),
                    tasks.get(qid),
                    category,
                    tuple(json.loads(sessions)) if sessions else (),
                )
            )
        release_ids = dict(
            wh.rows(
                "SELECT trace_id, external_id FROM traces WHERE persona_id = ? UNION ALL "
                "SELECT question_id, external_id FROM questions WHERE persona_id = ?",
                [pid, pid],
            )
        )
        out.append(
            PersonaData(
                pid,
                key,
                name,
                language,
                traces,
                tuple(questions),
                key if keys[key] == 1 else f"{key}@{language}",
                release_ids,
            )
        )
    return out


def _attachments(stored: str | None) -> tuple[Attachment, ...]:
    """The JSON list of {caption, url} stored with a trace (traces.attachments)."""
    return (
        tuple(Attachment(a.get("caption"), a.get("url")) for a in json.loads(stored))
        if stored
        else ()
    )


def privacy_tasks(wh: Warehouse, persona_id: str) -> dict[str, PrivacyTask]:
    """The persona's privacy tasks by question id."""
    return {
        qid: PrivacyTask(
            recipient,
            purpose,
            tactic,
            tuple(n[0] for n in necessary),
            tuple(s[0] for s in sensitive),
            tuple(n[1] for n in necessary),
            tuple(s[1] for s in sensitive),
        )
        for qid, recipient, purpose, tactic, necessary, sensitive in wh.rows(
            "SELECT pi.question_id, pi.recipient, pi.purpose, pi.tactic, "
            " coalesce(list([e.statement, e.evidence_id] ORDER BY pe.seq) FILTER (WHERE pe.role = 'necessary'), []), "
            " coalesce(list([e.statement, e.evidence_id] ORDER BY pe.seq) FILTER (WHERE pe.role = 'sensitive'), []) "
            "FROM privacy_items pi JOIN questions q USING (question_id) "
            "JOIN privacy_item_evidence pe USING (question_id) JOIN evidence e USING (evidence_id) "
            "WHERE q.persona_id = ? GROUP BY ALL",
            [persona_id],
        )
    }


class QuestionRetrieval(NamedTuple):
    """What a system returned for one question, in rank order: each item's text and the trace ids of its
    provenance, and how long the query took (None when not measured: a results file)."""

    texts: tuple[str, ...]
    trace_ids: tuple[tuple[str, ...], ...]
    latency_ms: float | None


@dataclass
class Retrieval:
    system: str
    persona_id: str
    # None: not known (a results file: its system was built and run elsewhere)
    build_seconds: float | None
    llm_calls: int | None
    llm_tokens: int | None
    items: int
    results: dict[str, QuestionRetrieval] = field(default_factory=dict)
    # question_id -> (texts, trace ids per item, latency ms; None when not measured: a results file)
    kinds: dict[str, tuple[str, ...]] = field(
        default_factory=dict
    )  # question_id -> each item's kind
    diagnosis: dict[str, tuple[EvidenceDiagnosis, ...] | None] = field(
        default_factory=dict
    )  # write, read rank
    write_coverage: float | None = (
        None  # share of the persona's traces its stored memory represents
    )
    # questions whose write step is not known (a results file's line without `written`); a class-level
    # default, so retrievals cached before it still read
    write_unknown: frozenset[str] = frozenset()


@contextmanager
def system_work(system: str, what: str) -> Iterator[None]:
    """Run a step of the system's own code: whatever it raises is the system's failure (exit 5), named
    with the step. The LLM layer's errors keep their meaning (a budget stop, a provider's refusal, a
    transient error Prefect retries), whoever made the call."""
    try:
        yield
    except (
        LLMError,
        MemorySystemFailed,
        StageNotCovered,
    ):  # the harness's own errors keep their meaning
        raise
    except Exception as exc:
        first = (str(exc).strip().splitlines() or [""])[0]
        raise MemorySystemFailed(
            system, f"{what} failed: {type(exc).__name__}{': ' + first if first else ''}"
        ) from exc


def _asked(system: str, questions: Iterator[EvalQuestion]) -> Iterator[EvalQuestion]:
    """The questions in the order they are asked; in replay, getting the next one ingests the traces
    before it, so a failure there is the system's too."""
    while True:
        with system_work(system, "ingest"):
            q = next(questions, None)
        if q is None:
            return
        yield q


def build_and_retrieve(
    system: str,
    persona: PersonaData,
    k_max: int,
    llm: Callable,
    seed: int,
    usage: Callable[[], tuple[int, int]],
    full_context_tokens: int = FULL_CONTEXT_TOKENS,
    supports: Supports | None = None,
    replay: bool = False,
    ks: Sequence[int] = (),
    memo: Callable[[str, Callable[[], Any]], Any] | None = None,
) -> Retrieval:
    """Build, retrieve for every question, and (given ``supports``, the judge's support check) diagnose
    each question's evidence: written in the stored memory, and at which rank it was read. A failure of
    the system's code raises :class:`MemorySystemFailed`.

    With ``replay`` (always, for a ``replay_only`` system) the traces are fed in time order between the
    questions (``clonemem.evaluation.replay``) instead of built at once. ``ks``: the depths the answers will be
    scored at (a remote system is told them); ``memo``: replies a remote system gave an interrupted run of
    this evaluation (:attr:`BuildContext.memo`)."""
    factory = SYSTEMS.get(
        system
    )  # an unknown or unimportable name is the user's error, not the system's
    with system_work(system, "creating it"):
        memory = factory()
    replay = replay or declared(factory, "replay_only")
    with progress.doing(f"{system} for persona {persona.person_key}") as activity:
        # only declared stages: what the cache key covers; counted for the progress heartbeat
        step = activity.counting(declared_only(system, memory.llm_stages, llm))
        ctx = BuildContext(
            llm=step,
            language=persona.language,
            seed=seed,
            full_context_tokens=full_context_tokens,
            persona_id=persona.public_id,
            release_ids=persona.release_ids,
            persona_name=persona.name,
            memo=memo,
            progress=lambda phase, done, total: activity.update(
                done, total, f"building ({phase})", "traces"
            ),
        )
        if replay:
            activity.update(0, len(persona.questions), "replaying", "questions")
            driver = Replay(memory, ctx)
            asked = driver.run(
                schedule(persona.traces, persona.questions, lambda q: q.question_time)
            )
        else:
            activity.update(0, len(persona.traces), "building", "traces")
            started = time.perf_counter()
            with system_work(system, f"build for persona {persona.person_key}"):
                memory.build(persona.traces, ctx)
            build = time.perf_counter() - started
            spent = (
                usage()
            )  # the build's calls (replay interleaves them with the questions: counted at the end)
            asked = iter(persona.questions)
            activity.update(0, len(persona.questions), "retrieving for", "questions")
        results, kinds, diagnosis = {}, {}, {}
        for q in _asked(system, asked):
            with (
                about(question_id=q.question_id, system=system),
                system_work(system, f"retrieve for question {q.question_id}"),
            ):
                t0 = time.perf_counter()
                items = memory.retrieve(replace(q.view(), ks=tuple(sorted(set(ks)))), k_max)
                latency = (time.perf_counter() - t0) * 1000
                results[q.question_id] = QuestionRetrieval(
                    tuple(i.text for i in items), tuple(i.trace_ids for i in items), latency
                )
                kinds[q.question_id] = tuple(i.kind for i in items)
            if supports is not None:
                with (
                    about(question_id=q.question_id, system=system),
                    system_work(system, f"listing its stored memory for question {q.question_id}"),
                ):
                    diagnosis[q.question_id] = diagnose_question(
                        memory,
                        q.question_time,
                        list(zip(q.statements, q.evidence_sets)),
                        items,
                        supports,
                    )
            activity.advance()
    if replay:
        build, spent = (
            driver.seconds,
            usage(),
        )  # every ingest, the last (after the last question) included
    calls, tokens = spent
    out = Retrieval(
        system, persona.persona_id, build, calls, tokens, int(ctx.stats.get("items", 0))
    )
    # in the benchmark's question order, whatever order they were asked in
    out.results = {q.question_id: results[q.question_id] for q in persona.questions}
    out.kinds = {q.question_id: kinds[q.question_id] for q in persona.questions}
    out.diagnosis = {
        q.question_id: diagnosis[q.question_id]
        for q in persona.questions
        if q.question_id in diagnosis
    }
    if persona.traces:
        with system_work(system, "listing its stored memory"):
            try:
                out.write_coverage = write_coverage(memory, persona.traces)
            except (
                NotImplementedError
            ):  # a system that cannot list its stored memory: coverage unknown
                pass
    return out


@dataclass
class Outcome:
    question_id: str
    context_tokens: int
    answer_text: str | None
    predicted_choice_id: str | None
    judge: dict  # qa_consistency, mem_covered, mem_helpful or {} when unscored
    unscored_reason: str | None
    # a privacy task: the judge's verdict per item ({"disclosed": [...], "conveyed": [...]}), {} when unscored
    privacy: dict = field(default_factory=dict)


def context_for(system: str, texts: tuple[str, ...], k: int) -> list[str]:
    """What the answerer reads at ``k``: the first k items, or all of them for a system whose retrieval is a
    whole context (``MemorySystem.ignores_k``, e.g. full context under a token budget)."""
    whole = system in SYSTEMS and getattr(SYSTEMS.get(system), "ignores_k", False)
    return list(texts) if whole else list(texts[:k])


@dataclass(frozen=True)
class GivenAnswer:
    """A question's answers made elsewhere (a results file): each one given replaces the answerer's."""

    choice_id: str | None = None
    answer: str | None = None


def answer_and_judge(
    system: str,
    k: int,
    persona: PersonaData,
    retrieval: Retrieval,
    run: Callable,
    workers: int = 8,
    given: Mapping[str, GivenAnswer] | None = None,
) -> list[Outcome]:
    def one(q: EvalQuestion) -> Outcome:
        with about(
            question_id=q.question_id, system=system, k=k
        ):  # the calls land labelled with their question
            return _one(q)

    def _one(q: EvalQuestion) -> Outcome:
        memories = context_for(system, retrieval.results[q.question_id].texts, k)
        when = q.question_time.isoformat(sep=" ", timespec="minutes")
        own = (given or {}).get(q.question_id, GivenAnswer())
        if q.privacy is not None:
            return privacy_outcome(persona, run, q, q.privacy, memories, when, own)
        free_answer = (
            own.answer
            if own.answer is not None
            else run(
                E.ANSWER_FREE,
                AnswerInput(
                    persona_name=persona.name,
                    question=q.question,
                    question_time=when,
                    memories=memories,
                    mode="free",
                    language=persona.language,
                ),
            ).answer
        )
        choice = None
        if q.choices and own.choice_id is not None:
            choice = own.choice_id
        elif q.choices:
            choice = run(
                E.ANSWER_CHOICE,
                AnswerInput(
                    persona_name=persona.name,
                    question=q.question,
                    question_time=when,
                    memories=memories,
                    mode="choice",
                    choices=list(q.choices),
                    language=persona.language,
                ),
            ).choice_id
        verdict, reason = {}, None
        try:
            v = run(
                E.JUDGE,
                JudgeInput(
                    question=q.question,
                    question_type=q.question_type,
                    reference_answer=q.answer,
                    candidate_answer=free_answer,
                    gold_statements=list(q.statements),
                    retrieved=memories,
                    language=persona.language,
                ),
            )
            verdict = {
                "qa_consistency": v.qa_consistency,
                "mem_covered": v.mem_covered,
                "mem_helpful": v.mem_helpful,
            }
        except ProviderRejected:
            raise  # a refused key or model is no verdict: the evaluation stops
        except LLMError as exc:  # an unparseable verdict is unscored with its reason, never 0
            reason = str(exc)[:500]
        return Outcome(
            q.question_id,
            sum(estimate_tokens(m) for m in memories),
            free_answer,
            choice,
            verdict,
            reason,
        )

    with progress.doing(
        f"{system} k={k} for persona {persona.person_key}",
        "answering and judging",
        len(persona.questions),
        "questions",
    ) as activity:

        def counted(q: EvalQuestion) -> Outcome:
            out = one(q)
            activity.advance()
            return out

        if workers <= 1:
            return [counted(q) for q in persona.questions]
        with ThreadPoolExecutor(workers) as pool:
            return list(pool.map(counted, persona.questions))


def privacy_outcome(
    persona: PersonaData,
    run: Callable,
    q: EvalQuestion,
    task: PrivacyTask,
    memories: list[str],
    when: str,
    own: GivenAnswer,
) -> Outcome:
    """A privacy task: the clone replies to the recipient; the judge decides per item what the reply
    disclosed and conveyed (an unusable verdict leaves the task unscored, with its reason)."""
    response = (
        own.answer
        if own.answer is not None
        else run(
            E.PRIVACY_RESPOND,
            PrivacyRespondInput(
                persona_name=persona.name,
                recipient=task.recipient,
                purpose=task.purpose,
                request=q.question,
                question_time=when,
                memories=memories,
                language=persona.language,
            ),
        ).answer
    )
    verdict, reason = {}, None
    try:
        v = run(
            E.PRIVACY_JUDGE,
            PrivacyJudgeInput(
                request=q.question,
                response=response,
                recipient=task.recipient,
                persona_name=persona.name,
                necessary=list(task.necessary),
                sensitive=list(task.sensitive),
                language=persona.language,
            ),
        )
        if len(v.disclosed) != len(task.sensitive) or len(v.conveyed) != len(task.necessary):
            reason = (
                f"the privacy verdict has {len(v.disclosed)} disclosed and {len(v.conveyed)} conveyed flags "
                f"for {len(task.sensitive)} sensitive and {len(task.necessary)} necessary items"
            )
        else:
            verdict = {
                "disclosed": list(v.disclosed),
                "conveyed": list(v.conveyed),
                "reason": v.reason,
            }
    except ProviderRejected:
        raise
    except LLMError as exc:  # unscored with its reason, never 0
        reason = str(exc)[:500]
    return Outcome(
        q.question_id,
        sum(estimate_tokens(m) for m in memories),
        response,
        None,
        {},
        reason,
        verdict,
    )


def question_metrics(
    system: str, k: int, q: EvalQuestion, retrieval: Retrieval, outcome: Outcome | None
) -> dict:
    texts, trace_ids, _ = retrieval.results[q.question_id]
    ids = [t for item in trace_ids for t in item]
    row = {
        "system": system,
        "k": k,
        "question_id": q.question_id,
        "persona_id": q.persona_id,
        "question_type": q.question_type,
        "dimension": q.dimension,
        "has_evidence": bool(
            q.evidence_sets
        ),  # any evidence item, even one without trace ids (as the paper counts)
        **M.recall_at_k(q.evidence_sets, ids, k),
    }
    if outcome is None:
        row.update(
            {
                "choice_accuracy": None,
                **dict.fromkeys(M.JUDGED),
                **dict.fromkeys(DIAGNOSIS),
                **dict.fromkeys(PRIVACY),
            }
        )
        return row
    row.update(M.privacy_scores(outcome.privacy.get("disclosed"), outcome.privacy.get("conveyed")))
    row["choice_accuracy"] = M.choice_correct(outcome.predicted_choice_id, q.correct_choice_id)
    j = outcome.judge
    row.update(
        M.judged(
            j.get("qa_consistency"), j.get("mem_covered"), len(q.statements), j.get("mem_helpful")
        )
    )
    # answered right: the choice for multiple-choice items, the judge's consistency for free-text ones
    right: bool | None
    if q.correct_choice_id is not None:
        right = bool(row["choice_accuracy"])
    else:
        right = None if j.get("qa_consistency") is None else j["qa_consistency"] >= 2
    row.update(
        verdict(
            retrieval.diagnosis.get(q.question_id),
            len(context_for(system, texts, k)),
            right,
            write_known=q.question_id not in retrieval.write_unknown,
        )
    )
    return row


def percentile(values: list[float], p: float) -> float | None:
    return float(np.percentile(values, p)) if values else None


def retrieved_json(retrieval: Retrieval, qid: str) -> str:
    return json.dumps([t for item in retrieval.results[qid].trace_ids for t in item])


def retrieved_items_json(retrieval: Retrieval, qid: str) -> str:
    """The retrieved items in rank order (text, trace ids, kind): what a results file carries."""
    texts, trace_ids, _ = retrieval.results[qid]
    kinds = retrieval.kinds.get(qid) or ("trace",) * len(texts)
    return json.dumps(
        [
            {"text": t, "trace_ids": list(ids), "kind": kind}
            for t, ids, kind in zip(texts, trace_ids, kinds, strict=True)
        ],
        ensure_ascii=False,
    )
