"""Superficial cues of a multiple-choice item (QC 3): would picking the longest option, or the
option sharing most content words with the question, find the correct one? Pure functions, used by
the gate's statistics (:func:`clonemem.qa.land.cue_stats`) and the dashboard's cue table, both through
:func:`tally_cues`."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from clonemem import text as textutil

# Accepted items of one benchmark with their options in order: (question_id, question, correct, [{id, text}]).
CUE_ITEMS_SQL = (
    "SELECT q.question_id, q.question, q.correct_choice_id, list({'id': c.choice_id, 'text': c.text} ORDER BY c.seq) AS choices "
    "FROM questions q JOIN question_choices c USING (question_id) WHERE q.benchmark_id = ? GROUP BY ALL"
)


def credit(scores: dict[str, float], correct: str) -> float:
    """A heuristic that meets a tie guesses among the tied options: credit 1/ties, not a letter order."""
    best = max(scores.values())
    tied = [k for k, v in scores.items() if v == best]
    return 1.0 / len(tied) if correct in tied else 0.0


def cue_credits(question: str, correct: str, choices: list[dict]) -> tuple[float, float] | None:
    """(longest-option credit, question-overlap credit) of one item, or None when the correct option is the
    abstention E (or there are no A–D options): chance is 1/4 among A–D."""
    options = [c for c in choices if c["id"] != "E"]
    if correct == "E" or not options:
        return None
    q = set(textutil.content_words(question))
    return (
        credit({c["id"]: len(c["text"]) for c in options}, correct),
        credit(
            {c["id"]: len(q & set(textutil.content_words(c["text"]))) for c in options}, correct
        ),
    )


@dataclass(frozen=True)
class CueTally:
    """Credits summed over the items whose correct option is among A–D (``items``): how many of them the
    longest option, and the option sharing most content words with the question, would have found."""

    items: int = 0
    longest: float = 0.0
    overlap: float = 0.0


def tally_cues(items: Iterable[tuple[str, str, list[dict]]]) -> CueTally:
    """The cue credits of (question, correct choice id, ordered options) items, summed: what the gate's
    statistics and the dashboard's cue table both report, so the two cannot disagree."""
    longest = overlap = 0.0
    n = 0
    for question, correct, choices in items:
        credits = cue_credits(question, correct, choices)
        if credits is None:
            continue
        n += 1
        longest += credits[0]
        overlap += credits[1]
    return CueTally(n, longest, overlap)
