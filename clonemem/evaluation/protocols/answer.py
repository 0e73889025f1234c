"""The protocols' own answers and judgments for one (system, k, persona): each answer style's
answerer reads the same top-k memories as CloneMem's answerer (each memory with its session date),
or a predictions file's answer stands for it; then each protocol's judge labels the answer it
scores."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from clonemem import progress
from clonemem.evaluation.protocols import longmemeval, mem0
from clonemem.evaluation.protocols import stages as S
from clonemem.evaluation.protocols.base import Prediction, Protocol, ProtocolQuestion
from clonemem.evaluation.protocols.load import locomo_date, longmemeval_date
from clonemem.evaluation.run import PersonaData, Retrieval, context_for
from clonemem.llm.types import LLMError, ProviderRejected, about
from clonemem.schemas.evaluation import LongMemEvalJudgeInput, Mem0JudgeInput, ProtocolAnswerInput

DATE_FORMS: dict[str, Callable[[dt.datetime], str]] = {
    "locomo": locomo_date,
    "longmemeval": longmemeval_date,
}


@dataclass(frozen=True)
class ProtocolOutcome:
    """One question's protocol answers (by answer style) and judge labels (by protocol: True
    correct, False wrong, None unscored with the reason in ``notes``)."""

    question_id: str
    answers: dict[str, str | None] = field(default_factory=dict)
    labels: dict[str, bool | None] = field(default_factory=dict)
    notes: dict[str, str] = field(
        default_factory=dict
    )  # protocol -> the judge's label and reason, or why not
    given: str | None = (
        None  # a predictions file's answer: it stands for every protocol's answer and pick
    )
    missing: bool = (
        False  # a predictions file has no prediction for it: every protocol leaves it unscored
    )

    def prediction(
        self, proto: Protocol, choice_id: str | None, ranking: tuple[str, ...]
    ) -> Prediction:
        """What ``proto`` scores: its answer style's answer (or the file's answer, and the pick it
        names instead of the answerer's ``choice_id``), the judges' labels and the ranking."""
        if self.missing:
            return Prediction(ranking=ranking)
        if self.given is not None:
            return Prediction(self.given, dict(self.labels), None, ranking)
        answer = self.answers.get(proto.answer_style) if proto.answer_style else None
        return Prediction(answer, dict(self.labels), choice_id, ranking)


def dated_memories(
    texts: Sequence[str],
    trace_ids: Sequence[Sequence[str]],
    dates: Mapping[str, dt.datetime],
    style: str,
) -> list[str]:
    """Each memory led by the date of its earliest trace's session (as the protocol's answerer reads
    it)."""
    form = DATE_FORMS[style]
    out = []
    for text, ids in zip(texts, trace_ids, strict=True):
        known = [dates[t] for t in ids if t in dates]
        out.append(f"[{form(min(known))}] {text}" if known else text)
    return out


def answer_protocols(
    system: str,
    k: int,
    persona: PersonaData,
    retrieval: Retrieval,
    questions: Mapping[str, ProtocolQuestion],
    protocols: Sequence[Protocol],
    dates: Mapping[str, dt.datetime],
    run: Callable,
    workers: int = 1,
    given: Mapping[str, str] | None = None,
    given_only: bool = False,
) -> list[ProtocolOutcome]:
    """Every question's protocol answers and labels, in the persona's question order. With
    ``given_only`` (a predictions file) a question without a given answer is left unscored, never
    answered here."""
    styles = sorted({p.answer_style for p in protocols if p.answer_style})

    def one(qid: str) -> ProtocolOutcome:
        with about(question_id=qid, system=system, k=k):
            return _one(qid)

    def _one(qid: str) -> ProtocolOutcome:
        q = questions[qid]
        texts, ids, _ = retrieval.results[qid]
        shown = context_for(system, texts, k)
        own = (given or {}).get(qid)
        if own is None and given_only:
            return ProtocolOutcome(qid, missing=True)
        answers: dict[str, str | None] = {}
        for style in styles:
            if own is not None:
                answers[style] = own
                continue
            memories = dated_memories(shown, ids[: len(shown)], dates, style)
            when = DATE_FORMS[style](q.question_time) if q.question_time else ""
            answers[style] = run(
                ANSWERERS[style],
                ProtocolAnswerInput(
                    question=q.question,
                    question_date=when,
                    memories=memories,
                    language=persona.language,
                ),
            ).answer
        labels: dict[str, bool | None] = {}
        notes: dict[str, str] = {}
        for proto in protocols:
            if proto.judge and proto.applies(q) and proto.answer_style:
                labels[proto.name], notes[proto.name] = _judge(
                    run, proto.name, q, answers[proto.answer_style] or ""
                )
        return ProtocolOutcome(qid, answers, labels, notes, own)

    qids = [q.question_id for q in persona.questions if q.question_id in questions]
    with progress.doing(
        f"{system} k={k} for persona {persona.person_key}",
        "protocol answers",
        len(qids),
        "questions",
    ) as activity:

        def counted(qid: str) -> ProtocolOutcome:
            out = one(qid)
            activity.advance()
            return out

        if workers <= 1:
            return [counted(q) for q in qids]
        with ThreadPoolExecutor(workers) as pool:
            return list(pool.map(counted, qids))


ANSWERERS = S.ANSWERERS


def _judge(run: Callable, name: str, q: ProtocolQuestion, answer: str) -> tuple[bool | None, str]:
    """The protocol's judge on one answer: its label and note; an unreadable verdict is unscored."""
    try:
        if name == "mem0":
            v = run(
                S.JUDGE_MEM0,
                Mem0JudgeInput(question=q.question, gold_answer=q.answer, generated_answer=answer),
            )
            return mem0.label_correct(v.label), f"{v.label}: {v.reason}"
        if name == "longmemeval":
            r = run(
                S.JUDGE_LONGMEMEVAL,
                LongMemEvalJudgeInput(
                    question_type=q.source_type,
                    question=q.question,
                    answer=q.answer,
                    response=answer,
                    abstention=q.abstention,
                ),
            )
            return longmemeval.reply_correct(r.reply), r.reply
    except ProviderRejected:
        raise  # a refused key or model is no verdict: the evaluation stops
    except LLMError as exc:
        return None, str(exc)[:500]
    raise LookupError(
        f"protocol {name!r} names a judge with no stage (known: {', '.join(S.JUDGES)})"
    )
