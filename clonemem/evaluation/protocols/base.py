"""What every standard protocol shares: the question as a protocol sees it, what was predicted for
it, the per-question scores a protocol gives, and the groups it reports them in.

A protocol (one module each, registered in :data:`clonemem.evaluation.protocols.PROTOCOLS`) is a
pure function of these records: no warehouse, no model. Its answerer and judge are stages
(``clonemem/evaluation/protocols/stages.py``) that the evaluation runs before scoring.
"""

from __future__ import annotations

import datetime as dt
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import ClassVar, Literal

Granularity = Literal["qa", "turn", "session"]


@dataclass(frozen=True)
class ProtocolQuestion:
    """One question with what the protocols read of it (the warehouse's ids; the source's own
    labels)."""

    question_id: str
    persona_id: str
    external_id: str  # the source's id (LongMemEval's question_id, with its ``_abs`` suffix)
    question: str
    answer: str
    source_type: str  # the source's own type label (LongMemEval's / PersonaMem's question_type)
    category: int | None = None  # LoCoMo's category number
    question_time: dt.datetime | None = None  # when it is asked
    evidence_turns: frozenset[str] = (
        frozenset()
    )  # trace ids that hold the answer (LongMemEval: has_answer)
    correct_choice_id: str | None = None

    @property
    def abstention(self) -> bool:
        """LongMemEval marks an unanswerable question by ``_abs`` in its id."""
        return "_abs" in self.external_id


@dataclass(frozen=True)
class Prediction:
    """What was predicted for one question by one system at one k: the protocol answerer's reply (or
    a predictions file's), the judge's labels by protocol (True correct, False wrong, None
    unscored), the multiple-choice pick, and the retrieved trace ids in rank order (de-duplicated).
    """

    answer: str | None = None
    judged: Mapping[str, bool | None] = field(default_factory=dict)
    choice_id: str | None = None
    ranking: tuple[str, ...] = ()


@dataclass(frozen=True)
class Scope:
    """A question's history as retrieval is scored against it: each trace's session (LongMemEval's
    session id; the persona's only session elsewhere)."""

    session_of: Mapping[str, str]


@dataclass(frozen=True)
class QuestionScore:
    granularity: Granularity
    k: int | None  # the retrieval cut-off (retrieval scores); None: the evaluation's k
    metric: str
    value: float | None  # None: unscored (``reason`` says why)
    reason: str | None = None


@dataclass(frozen=True)
class Group:
    name: str
    category: int | None = None


class Protocol(ABC):
    """One standard protocol: its name and rule version, the metrics it reports, the stages it needs
    (an answer style and judges), how one question scores and which groups it is reported in."""

    name: ClassVar[str]
    version: ClassVar[str]
    metrics: ClassVar[tuple[str, ...]]
    answer_style: ClassVar[str | None] = (
        None  # the protocol answerer it scores ("locomo", "longmemeval")
    )
    judge: ClassVar[str | None] = None  # the judge stage it needs (by protocol name), if any
    task_average: ClassVar[bool] = (
        False  # also report the mean of the per-type means (``task_average``)
    )
    ranks: ClassVar[bool] = (
        False  # scores the ranking of turns (retrieved as deep as ranking_depth)
    )

    def applies(self, q: ProtocolQuestion) -> bool:
        """Whether the question is scored at all (else it is left out of every group)."""
        return True

    @abstractmethod
    def score(self, q: ProtocolQuestion, p: Prediction, scope: Scope) -> list[QuestionScore]:
        """The question's scores; an empty list when this protocol leaves it out."""

    @abstractmethod
    def groups(self, q: ProtocolQuestion, granularity: Granularity) -> Sequence[Group]:
        """The groups the question's scores of one granularity count in."""

    def type_group(self, q: ProtocolQuestion) -> str | None:
        """The question-type group, when the protocol reports a task average over them."""
        return None
