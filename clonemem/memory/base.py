"""The memory-system interface.

A system is fed a persona's traces in one of two ways:

* batch (``build``): every trace at once, then retrieval queries "as of" a question's time: only
  traces dated at or before ``as_of`` may contribute, which every built-in enforces through timestamps
  on what it stores (a consolidated memory keeps its versions with the time each became valid), never
  by rebuilding per question;
* chronological replay (``ingest``, driven by ``clonemem.evaluation.replay``): traces arrive in time
  order, and before each question the system has been given every trace dated at or before the
  question's time and nothing later. A system that only stores what it is given (a remote service)
  can only be evaluated this way (``replay_only``).

Every retrieved item carries the trace ids it came from, so recall over trace ids is computable for
every system.
"""

from __future__ import annotations

import datetime as dt
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel

from clonemem.registry import Registry
from clonemem.schemas.config import FULL_CONTEXT_TOKENS

if TYPE_CHECKING:
    from clonemem.stages import Stage


@dataclass(frozen=True)
class Attachment:
    """An image shared with a turn (LoCoMo's ``blip_caption`` and ``img_url``)."""

    caption: str | None = None
    url: str | None = None


@dataclass(frozen=True)
class MemoryTrace:
    trace_id: str  # warehouse id
    medium: str
    event_date: dt.datetime
    content: str
    # who the trace reached: relation names, or "*" for everyone (clonemem/privacy.py); empty: only the persona
    reached: tuple[str, ...] = ()
    # what a conversational source says of the turn (None / empty where it says nothing, e.g. generated):
    session_key: str | None = (
        None  # the source's session id (LongMemEval haystack id, LoCoMo session_N)
    )
    speaker: str | None = None  # who wrote it (a LoCoMo speaker; `user` / `assistant`)
    session_date: dt.datetime | None = None  # the session's own date
    attachments: tuple[Attachment, ...] = ()  # images shared with it


@dataclass(frozen=True)
class QuestionView:
    """What a system may know of the question beyond its text (only the oracle uses the gold)."""

    question_id: str
    question: str
    question_time: dt.datetime
    gold_trace_ids: tuple[str, ...] = ()
    gold_statements: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (statement, trace ids)
    recipient: str | None = (
        None  # a privacy task's asker (a relation name); None: a question to the persona
    )
    ks: tuple[int, ...] = ()  # the k values the answers will be scored at (told to a remote system)


@dataclass(frozen=True)
class Retrieved:
    text: str
    trace_ids: tuple[str, ...]
    score: float = 0.0
    kind: str = "trace"  # trace, fact, note, summary, attribute ...


# How a system's own LLM work is done: (stage name, inputs) -> validated output, through the
# extractor role's model (the wrapper, limits, accounting and call log apply).
LLMStep = Callable[[str, BaseModel], BaseModel]
# (phase, traces taken in so far, traces given): how far a build got, for the run's progress heartbeat
BuildProgress = Callable[[str, int, int], None]


def _no_progress(phase: str, done: int, total: int) -> None:
    """Nobody is listening (a build outside an evaluation run)."""


@dataclass
class BuildContext:
    llm: LLMStep
    language: str = "en"
    seed: int = 0
    stats: dict = field(default_factory=dict)
    full_context_tokens: int = FULL_CONTEXT_TOKENS  # the run's `evaluation.full_context_tokens` (the full-context baseline's budget)
    # What a system outside this process is told instead of warehouse ids: the persona's release id, and
    # the release id of each trace and question (warehouse id -> release `id`).
    persona_id: str = ""
    release_ids: Mapping[str, str] = field(default_factory=dict)
    # A slow build may report how far it got (``ctx.progress("extracting", 120, 400)``): the evaluation
    # logs it while the build runs. Reporting is optional; nothing depends on it.
    progress: BuildProgress = _no_progress
    persona_name: str = ""  # the person's name (told to a remote system on reset)
    # Replies a remote system already gave an interrupted run of this evaluation (``remote.Memo``): a
    # resumed run takes them from here instead of asking again. None: ask.
    memo: Callable[[str, Callable[[], Any]], Any] | None = None


class MemorySystem(ABC):
    """A memory system. Besides ``build`` and ``retrieve`` it declares, on its class, the LLM stages it
    may call (``llm_stages``; each stage names its own offline handler): the only stages ``ctx.llm``
    runs for it, and, with the code of its module, what its cached results are keyed on."""

    name: ClassVar[str]
    llm_stages: ClassVar[tuple[Stage, ...]] = ()
    # What the code hash and stage models cannot show of where results came from (a remote system's URL
    # and `/v1/info` version, a results file's hash): merged into the system's provenance on evaluation.
    provenance_extra: ClassVar[Mapping[str, str]] = {}
    # A retrieval that is a whole context (e.g. every visible trace under a token budget): the answerer
    # reads all of it at every k, instead of the first k items.
    ignores_k: ClassVar[bool] = False
    # Set for a system that holds only what it was given (a remote service): evaluation feeds it by
    # chronological replay, never ``build``.
    replay_only: ClassVar[bool] = False
    # Optional parts of the memory protocol the system honours when served (``clonemem serve-memory``:
    # ``/v1/info`` features), e.g. "recipient" for one that keeps to what reached a privacy task's asker.
    protocol_features: ClassVar[tuple[str, ...]] = ()
    # False for a system whose results are not a function of its code and inputs (a remote service may
    # change between runs): its retrievals are never served from the task cache.
    cacheable: ClassVar[bool] = True
    # Set for a system whose ``build`` followed by time-aware ``retrieve`` gives exactly what chronological
    # replay gives (each question answered from the past alone, corpus statistics included): evaluation
    # then builds it once and records its figures as `replay` figures. Claim it only where a test holds it
    # (tests/test_retrieval_modes.py checks every registered system that does).
    exact_as_of: ClassVar[bool] = False

    @abstractmethod
    def build(self, traces: Sequence[MemoryTrace], ctx: BuildContext) -> None:
        """Ingest every trace of one persona, in time order."""

    def reset(self, ctx: BuildContext) -> None:
        """Start an empty memory for the persona of ``ctx`` before replay (a fresh instance is empty)."""

    def ingest(self, traces: Sequence[MemoryTrace], ctx: BuildContext) -> None:
        """Add the next traces of the persona (in time order, none earlier than those already given).

        The default keeps everything received and rebuilds over it with ``build``: exact (the system
        then holds only the past), and cheap for the raw retrievers, whose index is rebuilt in
        milliseconds; a system that calls an LLM while building should override it to add only the
        new traces (the default would pay for the old ones again)."""
        self._ingested: list[MemoryTrace] = [*getattr(self, "_ingested", ()), *traces]
        self.build(self._ingested, ctx)

    @abstractmethod
    def retrieve(self, question: QuestionView, k: int) -> list[Retrieved]:
        """Ranked items for the question, using only what was visible at ``question.question_time``."""

    def stored(self, as_of: dt.datetime | None = None) -> list[Retrieved]:
        """Everything in the system's memory that is valid at ``as_of`` (None: after the last trace),
        each item with its text and the trace ids of its provenance, in a stable order: what write
        coverage and the write-failure diagnosis read. Raw retrievers list their indexed
        units. Cheap (no LLM, no embedding) and exact. Every built-in system implements it; a plugin
        that does not gets NotImplementedError, and its write coverage is unknown."""
        raise NotImplementedError(f"{type(self).__name__} does not list its stored memory")


# Built-ins are registered in ``clonemem.memory``; other packages add systems through the
# ``clonemem.memory_systems`` entry-point group, or are named as ``package.module:Class``.
SYSTEMS: Registry[Callable[[], MemorySystem]] = Registry(
    "memory system",
    entry_point_group="clonemem.memory_systems",
    allow_import_paths=True,
    accepts=callable,
    expected="a MemorySystem class or a factory returning one",
)


def declared(factory: Callable[[], MemorySystem], flag: str) -> bool:
    """A class-level flag (``cacheable``, ``replay_only``, ...) of a registered factory: a
    ``MemorySystem`` class declares it, a factory function may not, and then has the base's value."""
    return bool(getattr(factory, flag, getattr(MemorySystem, flag)))


def declared_stages(system: str) -> tuple[Stage, ...]:
    """The stages memory system ``system`` declares (``llm_stages`` on its factory, read as declared:
    a factory without the attribute is an error, never "no stages", which would key its LLM-made
    results on nothing but its code)."""
    from clonemem.stages import Stage

    factory = SYSTEMS.get(system)
    try:
        stages = factory.llm_stages  # type: ignore[attr-defined]  # a factory is any callable; the attribute is checked below
    except AttributeError:
        raise TypeError(
            f"memory system {system!r}: its factory {factory!r} has no `llm_stages` (declare the "
            "stages it calls, or `llm_stages = ()` if it calls none); its results cannot be cached "
            "without them"
        ) from None
    if not all(isinstance(s, Stage) for s in stages):
        raise TypeError(
            f"memory system {system!r}: `llm_stages` must hold clonemem.stages.Stage objects"
        )
    return tuple(stages)


def declared_only(system: str, stages: Sequence[Stage], llm: LLMStep) -> LLMStep:
    """``llm`` for a system that may call only the stages it declares: they are what its cache key and its
    provenance cover, so any other stage is the system's failure."""
    from clonemem.memory.errors import MemorySystemFailed

    declared = {s.name for s in stages}

    def step(stage_name: str, inp: BaseModel) -> BaseModel:
        if stage_name not in declared:
            raise MemorySystemFailed(
                system,
                f"called stage {stage_name!r}, which its class does not declare in llm_stages",
            )
        return llm(stage_name, inp)

    return step
