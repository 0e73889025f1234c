"""Quick runs: evaluating some of a benchmark's questions (MemoryBench's ``--limit`` and ``--sample``).

``--limit N`` takes the first N questions in the benchmark's order (persona by persona); ``--sample N
--seed S`` draws N questions stratified by question type: each type gets its share of N (largest
remainders, at least one per type while N allows), and within a type the questions are ordered by a
seeded digest of their ids, so one seed always draws the same questions. Every persona keeps all its
traces (a question is still asked of the whole past). What was drawn is recorded with the evaluation
(``eval_runs.sample_json``) and shown on every leaderboard row; a sampled evaluation is never ranked
beside a full one (``clonemem/evaluation/leaderboard.py``).
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections import defaultdict
from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict

from clonemem.evaluation.run import EvalQuestion, PersonaData


class SampleSpec(BaseModel):
    """Which questions an evaluation asked when it did not ask them all."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["limit", "sample"]
    n: int  # asked for
    seed: int | None = None  # the draw's seed (``sample`` only)
    questions: int  # evaluated
    of: int  # in the benchmark

    def label(self) -> str:
        """How a leaderboard row names it: ``sample 50/300 seed 1`` or ``first 20/300``."""
        if self.kind == "limit":
            return f"first {self.questions}/{self.of}"
        return f"sample {self.questions}/{self.of} seed {self.seed}"


def _order(seed: int, question_id: str) -> str:
    return hashlib.sha256(f"{seed}:{question_id}".encode()).hexdigest()


def shares(counts: dict[str, int], n: int) -> dict[str, int]:
    """``n`` split over the types in proportion to ``counts`` (largest remainders; ties by type name),
    each type at most its count, and every type one at least while ``n`` reaches the number of types."""
    total = sum(counts.values())
    if n >= total:
        return dict(counts)
    floor = 1 if n >= len(counts) else 0
    exact = {t: n * c / total for t, c in counts.items()}
    got = {t: min(c, max(floor, int(exact[t]))) for t, c in counts.items()}
    left = n - sum(got.values())
    by_remainder = sorted(counts, key=lambda t: (-(exact[t] - int(exact[t])), t))
    while left > 0:
        moved = False
        for t in by_remainder:
            if left and got[t] < counts[t]:
                got[t] += 1
                left -= 1
                moved = True
        if not moved:
            break
    while left < 0:  # the floor of one per type overshot: take back from the largest shares
        t = max((x for x in got if got[x] > floor), key=lambda x: (got[x] - exact[x], x))
        got[t] -= 1
        left += 1
    return got


def chosen_ids(
    questions: Sequence[EvalQuestion], kind: Literal["limit", "sample"], n: int, seed: int = 0
) -> set[str]:
    """The question ids a quick run asks (``questions`` in benchmark order)."""
    if kind == "limit":
        return {q.question_id for q in questions[:n]}
    by_type: dict[str, list[EvalQuestion]] = defaultdict(list)
    for q in questions:
        by_type[q.question_type].append(q)
    take = shares({t: len(qs) for t, qs in by_type.items()}, n)
    return {
        q.question_id
        for t, qs in by_type.items()
        for q in sorted(qs, key=lambda q: _order(seed, q.question_id))[: take[t]]
    }


def quick_run(
    personas: Sequence[PersonaData],
    limit: int | None = None,
    sample: int | None = None,
    seed: int = 0,
) -> tuple[list[PersonaData], SampleSpec | None]:
    """The personas with only the questions a quick run asks (each keeps its traces), and what was
    drawn; the personas unchanged and None without ``limit`` or ``sample``. Both at once is a usage
    error the command line refuses before it gets here."""
    if limit is None and sample is None:
        return list(personas), None
    if limit is not None and sample is not None:
        raise ValueError("--limit and --sample go apart: give one")
    kind: Literal["limit", "sample"] = "limit" if limit is not None else "sample"
    n = limit if limit is not None else sample
    assert n is not None
    if n < 1:
        raise ValueError(f"--{kind} must be at least 1, not {n}")
    every = [q for p in personas for q in p.questions]
    keep = chosen_ids(every, kind, n, seed)
    out = [
        dataclasses.replace(p, questions=tuple(q for q in p.questions if q.question_id in keep))
        for p in personas
    ]
    spec = SampleSpec(
        kind=kind, n=n, seed=seed if kind == "sample" else None, questions=len(keep), of=len(every)
    )
    return [p for p in out if p.questions], spec
