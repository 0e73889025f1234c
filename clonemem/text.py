"""Small language-aware text utilities shared by the offline handlers and the retrievers."""

from __future__ import annotations

import re
from collections import Counter
from functools import lru_cache
from typing import Protocol

_SENTENCE = re.compile(r"(?<=[.!?。！？])\s*")
_WORD = re.compile(r"[A-Za-z][A-Za-z'\-]*|\d+")
_CJK = re.compile(r"[\u4e00-\u9fff]+")
_CJK_OR_WORD = re.compile(r"[\u4e00-\u9fff]+|[^\u4e00-\u9fff]+")

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


# -- retrieval tokens (BM25) ----------------------------------------------------------------------

_LATIN = re.compile(r"[^\W_]+(?:['’][^\W_]+)*")


class _Stemmer(Protocol):
    def stemWords(self, words: list[str]) -> list[str]: ...  # PyStemmer's name


@lru_cache(maxsize=1)
def _english() -> tuple[frozenset[str], _Stemmer, frozenset[str], frozenset[str]]:
    """NLTK's English stop words and Chinese stop words (both as bm25s ships them), the Snowball stemmer."""
    import Stemmer
    from bm25s.stopwords import STOPWORDS_CHINESE, STOPWORDS_EN_PLUS

    zh = frozenset(STOPWORDS_CHINESE)
    return (
        frozenset(STOPWORDS_EN_PLUS),
        Stemmer.Stemmer("english"),
        frozenset(w for w in zh if len(w) == 1),
        frozenset(w for w in zh if len(w) == 2),
    )


def retrieval_tokens(text: str) -> list[str]:
    """BM25 terms: Latin-script words lower-cased, stop words dropped, Snowball-stemmed ("researching"
    and "research" meet); Chinese runs as characters plus overlapping bigrams (no segmenter needed:
    unigrams keep recall for one-character words, bigrams keep the precision of two-character words),
    one-character Chinese stop words and stop-word bigrams dropped."""
    stop_en, stemmer, stop_zh1, stop_zh2 = _english()
    out: list[str] = []
    for run in _CJK_OR_WORD.findall(text):
        if _CJK.match(run):
            out.extend(c for c in run if c not in stop_zh1)
            out.extend(
                b for b in (run[i : i + 2] for i in range(len(run) - 1)) if b not in stop_zh2
            )
            continue
        words_ = [w.lower().replace("’", "'") for w in _LATIN.findall(run)]
        words_ = [
            w.split("'")[0] if w.endswith(("'s", "'t", "'re", "'ve", "'ll", "'d", "'m")) else w
            for w in words_
        ]
        out.extend(stemmer.stemWords([w for w in words_ if w and w not in stop_en]))
    return out


def content_words(text: str) -> list[str]:
    return [w for w in words(text) if (w not in STOPWORDS_EN and len(w) > 2) or _CJK.match(w)]


def keyphrases(text: str, limit: int = 8) -> list[str]:
    """The most frequent content words, ties broken by first appearance (deterministic)."""
    toks = content_words(text)
    first: dict[str, int] = {}
    for i, tok in enumerate(toks):
        first.setdefault(tok, i)
    counts = Counter(toks)
    return sorted(counts, key=lambda t: (-counts[t], first[t]))[:limit]
