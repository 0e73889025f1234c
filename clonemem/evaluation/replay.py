"""Chronological replay: a persona's history fed to a memory system in time order, questions asked in between.

Before each question (in ``question_time`` order; questions asked at the same time share one step)
the system has been given every trace dated at or before the question's time and nothing later, so
even a system that only stores what it receives (a remote service) is scored on the past alone. After
the last question the remaining traces are given too, so what the system stores at the end (write
coverage) covers the whole history, as after a batch ``build``.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from itertools import groupby
from typing import Literal, TypeVar

from clonemem.memory.base import BuildContext, MemorySystem, MemoryTrace

Q = TypeVar("Q")


@dataclass(frozen=True)
class Step:
    """Traces to give, then questions to ask (none in the final step)."""

    traces: tuple[MemoryTrace, ...]
    questions: tuple


def schedule(
    traces: Sequence[MemoryTrace], questions: Sequence[Q], when: Callable[[Q], dt.datetime]
) -> list[Step]:
    """The replay of a persona: one step per distinct question time, then one with the traces left."""
    ordered = sorted(traces, key=lambda t: (t.event_date, t.trace_id))
    asked = sorted(questions, key=when)  # stable: questions at one time keep their order
    steps, given = [], 0
    for time_, group in groupby(asked, key=when):
        upto = given
        while upto < len(ordered) and ordered[upto].event_date <= time_:
            upto += 1
        steps.append(Step(tuple(ordered[given:upto]), tuple(group)))
        given = upto
    if given < len(ordered) or not steps:
        steps.append(Step(tuple(ordered[given:]), ()))
    return steps


@dataclass
class Replay:
    """Drives one system through a persona's schedule; ``seconds`` is the time spent ingesting."""

    memory: MemorySystem
    ctx: BuildContext
    seconds: float = 0.0

    def run(self, steps: Sequence[Step]) -> Iterator:
        """Feed each step's traces, then yield each of its questions (the caller asks it)."""
        started = time.perf_counter()
        self.memory.reset(self.ctx)
        self.seconds += time.perf_counter() - started
        for step in steps:
            if step.traces:
                started = time.perf_counter()
                self.memory.ingest(step.traces, self.ctx)
                self.seconds += time.perf_counter() - started
            yield from step.questions


def replay_refused(factory: Callable[[], MemorySystem], extractor_live: bool) -> str | None:
    """Why ``factory`` may not be replayed, or None. A system that calls an LLM while building and has no
    ``ingest`` of its own would be rebuilt over its whole history at every question time (the default
    ``ingest``): cheap offline, a multiple of the build's price with a live model."""
    stages = getattr(factory, "llm_stages", ())
    own_ingest = getattr(factory, "ingest", MemorySystem.ingest) is not MemorySystem.ingest
    if extractor_live and stages and not own_ingest:
        return (
            f"memory system {getattr(factory, 'name', factory)!r} calls an LLM while building and has no incremental ingest: "
            "replaying it with a live extractor model would pay for its history again at every question "
            "time; evaluate it without evaluation.replay"
        )
    return None


Mode = Literal["replay", "in_process"]
MODES: tuple[Mode, ...] = ("replay", "in_process")


def retrieval_mode(factory: object, replay: bool) -> Mode:
    """How a system's figures were made, as the leaderboard ranks them: ``replay`` when, before each
    question, it had seen the past alone — fed by chronological replay (``evaluation.replay``, or a
    remote system), or built once where that provably retrieves the same (``exact_as_of``) —, else
    ``in_process`` (built once over the whole history, then filtered by time: what it made of later
    traces may shape an earlier question's answer, e.g. a day consolidated as a whole)."""
    if replay or getattr(factory, "replay_only", False) or getattr(factory, "exact_as_of", False):
        return "replay"
    return "in_process"


def fed_by_replay(factory: object, replay: bool) -> bool:
    """Whether evaluation drives the system by replay: a remote system always; with ``evaluation.replay``
    every system but those whose build retrieves exactly what replay would (built once: the same
    figures, without re-indexing at every question time)."""
    if getattr(factory, "replay_only", False):
        return True
    return replay and not getattr(factory, "exact_as_of", False)
