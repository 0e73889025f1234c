"""Why a memory system fails a question (after AMemGym): write, read or use.

For each gold evidence item (a statement and the traces that carry it), as of the question's time:

- *written*: some item the system stores then (``MemorySystem.stored``) has one of the evidence's
  traces in its provenance, and, when the item is a transformation of the traces (a Mem0 fact, an
  O-Mem attribute, an extracted summary), the ``judge`` role finds that it states the gold statement
  (the stage ``eval.support``). Raw items (a trace, an A-Mem note, which keeps its trace's content) need
  provenance only.
- *read at k*: among the first k items retrieved (what the answerer saw), one represents it in the
  same sense. Its rank is kept, so every k is decided from one retrieval.

Per question and k the first failing step is the diagnosis: ``write_failure`` if some evidence is not
written, else ``read_failure`` if some is not read, else ``utilization_failure`` if the choice is wrong
(free-text items: the judge's consistency below 2), else ``correct``. The four are exclusive.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from clonemem.memory.base import MemorySystem, Retrieved
from clonemem.schemas.evaluation import SupportInput
from clonemem.schemas.results import DIAGNOSIS

RAW_KINDS = frozenset(
    {"trace", "note", "statement"}
)  # items that carry their traces' (or the gold) text


@dataclass(frozen=True)
class EvidenceDiagnosis:
    written: bool | None  # None: not known (a results file that does not say)
    read_rank: int | None  # rank of the first retrieved item that represents it, None if none did


Supports = Callable[[str, Sequence[str]], list[bool]]  # statement, texts -> which texts state it


def judge_supports(run: Callable, language: str) -> Supports:
    """Support judgments through the ``eval.support`` stage, each (statement, text) asked once."""
    from clonemem.evaluation.stages import SUPPORT

    seen: dict[tuple[str, str], bool] = {}

    def supports(statement: str, texts: Sequence[str]) -> list[bool]:
        todo = list(dict.fromkeys(t for t in texts if (statement, t) not in seen))
        if todo:
            verdict = run(
                SUPPORT, SupportInput(statement=statement, memories=todo, language=language)
            )
            stated = set(verdict.supported)
            for i, text in enumerate(todo, 1):
                seen[(statement, text)] = i in stated
        return [seen[(statement, t)] for t in texts]

    return supports


def _represents(
    items: Sequence[Retrieved], traces: frozenset[str], statement: str, supports: Supports
) -> list[bool]:
    """Which of ``items`` represent the evidence: provenance, and for a transformed item, its statement."""
    linked = [bool(traces & set(i.trace_ids)) for i in items]
    transformed = [n for n, i in enumerate(items) if linked[n] and i.kind not in RAW_KINDS]
    out = [linked[n] and items[n].kind in RAW_KINDS for n in range(len(items))]
    if transformed:
        for n, ok in zip(transformed, supports(statement, [items[n].text for n in transformed])):
            out[n] = ok
    return out


def diagnose_question(
    memory: MemorySystem,
    question_time,
    evidence: Sequence[tuple[str, Sequence[str]]],
    retrieved: Sequence[Retrieved],
    supports: Supports,
) -> tuple[EvidenceDiagnosis, ...] | None:
    """Write and read of each evidence item (statement, trace ids); None when the system cannot list
    what it stores (a plugin without ``stored``)."""
    try:
        stored = memory.stored(question_time)
    except NotImplementedError:
        return None
    out = []
    for statement, trace_ids in evidence:
        traces = frozenset(trace_ids)
        if not traces:
            continue  # evidence naming no trace is skipped, as by the recall metrics
        candidates = [
            i for i in stored if not traces.isdisjoint(i.trace_ids)
        ]  # no set per item: it is per question
        written = any(_represents(candidates, traces, statement, supports))
        hits = _represents(retrieved, traces, statement, supports)
        out.append(EvidenceDiagnosis(written, next((n for n, hit in enumerate(hits) if hit), None)))
    return tuple(out)


def diagnose_read(
    evidence: Sequence[tuple[str, Sequence[str]]],
    retrieved: Sequence[Retrieved],
    supports: Supports,
    written: bool | None,
) -> tuple[EvidenceDiagnosis, ...]:
    """Read of each evidence item from the retrieved items alone (a results file: what the system stored is
    not known here); ``written`` is what the file says of the write step, if anything."""
    out = []
    for statement, trace_ids in evidence:
        if not trace_ids:
            continue
        hits = _represents(retrieved, frozenset(trace_ids), statement, supports)
        out.append(EvidenceDiagnosis(written, next((n for n, hit in enumerate(hits) if hit), None)))
    return tuple(out)


def verdict(
    evidence: tuple[EvidenceDiagnosis, ...] | None,
    seen: int,
    answered_right: bool | None,
    write_known: bool = True,
) -> dict[str, float | None]:
    """The first failing step as four exclusive indicators (all None when it cannot be decided: the
    system lists no stored memory, or the answer was not scored). ``seen``: how many retrieved items
    the answerer was given. When writing is not known (``written`` None, or ``write_known`` False: a
    results file's line that does not say, also for a question without evidence) the write step is left
    blank and the later steps are decided as if the evidence was written."""
    if evidence is None:
        return dict.fromkeys(DIAGNOSIS)
    if any(e.written is False for e in evidence):
        step = "write_failure"
    elif not all(e.read_rank is not None and e.read_rank < seen for e in evidence):
        step = "read_failure"
    elif answered_right is None:
        return dict.fromkeys(DIAGNOSIS)
    else:
        step = "correct" if answered_right else "utilization_failure"
    out: dict[str, float | None] = {name: float(name == step) for name in DIAGNOSIS}
    if not write_known or any(e.written is None for e in evidence):
        out["write_failure"] = None
    return out
