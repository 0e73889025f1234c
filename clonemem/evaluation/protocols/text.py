"""Token rules of the standard protocols, as the benchmarks' own evaluation code applies them.

- LoCoMo (``task_eval/evaluation.py``): commas dropped, lower-cased, ASCII punctuation removed, the
  words a/an/the/and removed, whitespace split, each token Porter-stemmed (NLTK's
  ``PorterStemmer``).
- mem0 / A-Mem (``evaluation/metrics/utils.py``): lower-cased, ``. , ! ?`` replaced by spaces,
  whitespace split (F1 over the sets of these tokens); BLEU-1 over ``nltk.word_tokenize`` of the
  lower-cased text.

``word_tokenize`` splits sentences with NLTK's pretrained English Punkt model (a data download, not
to be had here) and then applies its Treebank-style word tokenizer to each sentence. We split
sentences with an *untrained* Punkt tokenizer (the same algorithm without the English abbreviation
list and statistics) and apply the same word tokenizer per sentence. The two differ only where a
period inside the text follows an abbreviation the English model knows ("dr. smith", "p.m. on"):
untrained Punkt ends a sentence there, so the period becomes a token of its own ("dr", ".") where
``word_tokenize`` keeps "dr."; everything else (contractions, quotes, final punctuation, "3.5") is
tokenized identically.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Sequence
from functools import lru_cache
from types import SimpleNamespace

_PUNCTUATION = frozenset(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the|and)\b")


@lru_cache(maxsize=1)
def _nltk() -> SimpleNamespace:
    """NLTK's stemmer, tokenizers and BLEU, loaded when first scored with: importing any part of
    ``nltk`` runs its package ``__init__``, which loads SciPy (~2 s of CPU here, paid by every process
    that imports the evaluation flows, most of which never score text)."""
    from nltk.stem import PorterStemmer  # lazy: see above
    from nltk.tokenize import NLTKWordTokenizer  # lazy: see above
    from nltk.tokenize.punkt import PunktSentenceTokenizer  # lazy: see above
    from nltk.translate.bleu_score import SmoothingFunction, sentence_bleu  # lazy: see above

    return SimpleNamespace(
        stemmer=PorterStemmer(),  # NLTK's default mode, as LoCoMo's evaluation constructs it
        sentences=PunktSentenceTokenizer(),
        words=NLTKWordTokenizer(),
        smooth=SmoothingFunction().method1,
        sentence_bleu=sentence_bleu,
    )


def locomo_normalize(text: str) -> str:
    """LoCoMo's answer normalisation: commas dropped, lower case, punctuation removed, a/an/the/and
    removed, whitespace collapsed (in that order)."""
    text = text.replace(",", "").lower()
    text = "".join(ch for ch in text if ch not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


@lru_cache(maxsize=65536)
def _stem(word: str) -> str:
    return str(_nltk().stemmer.stem(word))


def locomo_tokens(text: str) -> list[str]:
    """Normalised, Porter-stemmed tokens (with repeats)."""
    return [_stem(w) for w in locomo_normalize(text).split()]


def bag_f1(prediction: Sequence[str], reference: Sequence[str]) -> float:
    """F1 over tokens counted with multiplicity; 0 when nothing is shared (or a side is empty)."""
    same = sum((Counter(prediction) & Counter(reference)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(prediction), same / len(reference)
    return 2 * precision * recall / (precision + recall)


def mem0_tokens(text: str) -> set[str]:
    """A-Mem's / mem0's simple tokens: lower case, ``. , ! ?`` as spaces, whitespace split, as a
    set."""
    text = text.lower()
    for mark in ".,!?":
        text = text.replace(mark, " ")
    return set(text.split())


def set_f1(prediction: set[str], reference: set[str]) -> float:
    """F1 over token sets; 0 when either is empty or nothing is shared."""
    if not prediction or not reference:
        return 0.0
    same = len(prediction & reference)
    if same == 0:
        return 0.0
    precision, recall = same / len(prediction), same / len(reference)
    return 2 * precision * recall / (precision + recall)


def word_tokens(text: str) -> list[str]:
    """``nltk.word_tokenize`` without the Punkt data: sentences by untrained Punkt, each
    word-tokenized by NLTK's Treebank-style tokenizer (see the module's note on where this can
    differ)."""
    nltk = _nltk()
    return [w for sentence in nltk.sentences.tokenize(text) for w in nltk.words.tokenize(sentence)]


def bleu1(prediction: str, reference: str) -> float:
    """NLTK's sentence BLEU with weights (1, 0, 0, 0) and smoothing method 1 over lower-cased word
    tokens (a prediction sharing no word scores 0; a short one pays the brevity penalty)."""
    hypothesis = word_tokens(prediction.lower())
    references = [word_tokens(reference.lower())]
    if not hypothesis:
        return 0.0  # NLTK's brevity penalty would divide by the empty hypothesis' length
    nltk = _nltk()
    return float(
        nltk.sentence_bleu(
            references, hypothesis, weights=(1, 0, 0, 0), smoothing_function=nltk.smooth
        )
    )
