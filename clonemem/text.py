"""Small language-aware text utilities shared by the offline handlers and the retrievers."""

from __future__ import annotations

import re
from collections import Counter

_SENTENCE = re.compile(r"(?<=[.!?。！？])\s*")
_WORD = re.compile(r"[A-Za-z][A-Za-z'\-]*|\d+")
_CJK = re.compile(r"[\u4e00-\u9fff]+")

STOPWORDS_EN = frozenset(
    """a about above after again against all am an and any are as at be because been before being below
    between both but by can could did do does doing down during each few for from further had has have
    having he her here hers herself him himself his how i if in into is it its itself just me more most my
    myself no nor not now of off on once only or other our ours ourselves out over own same she should so
    some such than that the their theirs them themselves then there these they this those through to too
    under until up very was we were what when where which while who whom why will with would you your
    yours yourself yourselves also still really today got get just like im ive dont didnt one bit lot
    """.split()
)


def sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE.split(text) if s.strip()]


def words(text: str) -> list[str]:
    """Lower-cased word tokens; Chinese runs become overlapping character bigrams."""
    tokens = [w.lower() for w in _WORD.findall(text)]
    for run in _CJK.findall(text):
        tokens.extend(run[i : i + 2] for i in range(max(1, len(run) - 1)))
    return tokens


def content_words(text: str) -> list[str]:
    return [w for w in words(text) if (w not in STOPWORDS_EN and len(w) > 2) or _CJK.match(w)]


def keyphrases(text: str, limit: int = 8) -> list[str]:
    """The most frequent content words, ties broken by first appearance (deterministic)."""
    toks = content_words(text)
    first = {}
    for i, tok in enumerate(toks):
        first.setdefault(tok, i)
    counts = Counter(toks)
    return sorted(counts, key=lambda t: (-counts[t], first[t]))[:limit]
