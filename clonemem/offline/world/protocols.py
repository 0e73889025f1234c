"""Offline answerers and judges of the standard protocols: deterministic rules over content words
that exercise each protocol's rules, so offline runs give non-trivial scores (not a reading of
meaning).

- LoCoMo's answerer replies in a few words (a date for "when" questions), and "Not mentioned in the
  conversation" when no retrieved excerpt shares a content word with the question;
- LongMemEval's answerer replies with the best excerpt's sentence and, for questions about time, its
  session date and how many days before the question's date it was; "I don't know" when nothing
  fits;
- mem0's judge is generous: CORRECT when the generated answer holds half of the gold answer's words;
- LongMemEval's judge applies its type's criterion: abstention recognised, numbers off by one
  tolerated (temporal-reasoning), the rubric's words partly used (preference), all of the answer's
  words present (the others; an answer given only in part is wrong).
"""

from __future__ import annotations

import datetime as dt
import re

from clonemem import text as textutil
from clonemem.offline import OfflineCall
from clonemem.schemas.evaluation import (
    FreeAnswer,
    LongMemEvalJudgeInput,
    Mem0JudgeInput,
    Mem0Verdict,
    ProtocolAnswerInput,
    YesNoReply,
)

NOT_MENTIONED = "Not mentioned in the conversation"
DONT_KNOW = "I don't know; our earlier chats do not contain that information."
ABSTAINS = (
    "not mentioned",
    "no information",
    "don't know",
    "do not know",
    "not contain",
    "cannot tell",
    "not available",
    "never mentioned",
)
TIME_WORDS = frozenset({"date", "day", "days", "week", "weeks", "month", "months", "year", "years"})
SHORT_WORDS = 6  # the LoCoMo answerer's reply length, in content words
GENEROUS = 0.5  # mem0 judge: share of the gold answer's words the answer must hold
RUBRIC = 0.3  # LongMemEval preference rubric: share of its words a response must use
_DATE = re.compile(r"^\[(?P<date>[^\]]+)\]\s*")
_NUMBER = re.compile(r"\d+")
_SPEAKER = re.compile(r"^[^:\n]{1,40}:\s*")


def _words(text: str) -> set[str]:
    return set(textutil.content_words(text)) or set(textutil.words(text))


def _split(memory: str) -> tuple[str | None, str]:
    """A memory's date prefix (``[date] ...``) and its text."""
    m = _DATE.match(memory)
    return (m.group("date"), memory[m.end() :]) if m else (None, memory)


def _best(inp: ProtocolAnswerInput) -> tuple[str | None, str] | None:
    """The retrieved sentence sharing most content words with the question and saying something the
    question does not (first on ties), with its memory's date; None when no sentence shares any."""
    asked = _words(inp.question)
    best, best_score = None, (0, False)
    for memory in inp.memories:
        date, body = _split(memory)
        for sentence in textutil.sentences(_SPEAKER.sub("", body, count=1)) or [body]:
            words = _words(sentence)
            score = (len(asked & words), bool(words - asked))
            if score[0] and score > best_score:
                best, best_score = (date, sentence.strip()), score
    return best


def _about_time(question: str) -> bool:
    """A question asking for a date or a span ("when", "how long", "how many days", "what year")."""
    words = textutil.words(question)
    pairs = list(zip(words, words[1:], strict=False))
    return bool(words) and (
        words[0] == "when"
        or ("how", "long") in pairs
        or any(a in ("many", "what", "which") and b in TIME_WORDS for a, b in pairs)
    )


def locomo_answer(call: OfflineCall) -> FreeAnswer:
    inp = call.inputs
    assert isinstance(inp, ProtocolAnswerInput)
    found = _best(inp)
    if found is None:
        return FreeAnswer(answer=NOT_MENTIONED)
    date, sentence = found
    if date and _about_time(inp.question):
        return FreeAnswer(answer=date)
    asked = _words(inp.question)
    new = [w for w in textutil.content_words(sentence) if w not in asked]
    return FreeAnswer(
        answer=" ".join(dict.fromkeys(new[:SHORT_WORDS])) or " ".join(sentence.split()[:8])
    )


def _days_before(date: str, today: str) -> int | None:
    parsed = [_parse(d) for d in (date, today)]
    if parsed[0] is None or parsed[1] is None:
        return None
    return (parsed[1].date() - parsed[0].date()).days


def _parse(text: str) -> dt.datetime | None:
    for form in ("%Y/%m/%d (%a) %H:%M", "%Y/%m/%d", "%Y-%m-%d %H:%M", "%Y-%m-%d", "%d %B %Y"):
        try:
            return dt.datetime.strptime(text.strip(), form)
        except ValueError:
            continue
    return None


def longmemeval_answer(call: OfflineCall) -> FreeAnswer:
    inp = call.inputs
    assert isinstance(inp, ProtocolAnswerInput)
    found = _best(inp)
    if found is None:
        return FreeAnswer(answer=DONT_KNOW)
    date, sentence = found
    if date and _about_time(inp.question):
        days = _days_before(date, inp.question_date)
        ago = f", {days} days before today ({inp.question_date})" if days is not None else ""
        return FreeAnswer(answer=f"{sentence} That was in our session of {date}{ago}.")
    return FreeAnswer(answer=sentence)


def mem0_judge(call: OfflineCall) -> Mem0Verdict:
    inp = call.inputs
    assert isinstance(inp, Mem0JudgeInput)
    gold, said = _words(inp.gold_answer), _words(inp.generated_answer)
    share = len(gold & said) / len(gold) if gold else 0.0
    label = "CORRECT" if share >= GENEROUS else "WRONG"
    return Mem0Verdict(
        reason=f"offline overlap judge: the answer holds {share:.0%} of the gold answer's words",
        label=label,
    )


def _numbers(text: str) -> set[int]:
    return {int(n) for n in _NUMBER.findall(text)}


def longmemeval_judge(call: OfflineCall) -> YesNoReply:
    inp = call.inputs
    assert isinstance(inp, LongMemEvalJudgeInput)
    response = inp.response.lower()
    if inp.abstention:
        return YesNoReply(reply="yes" if any(a in response for a in ABSTAINS) else "no")
    gold, said = _words(inp.answer), _words(inp.response)
    share = len(gold & said) / len(gold) if gold else 0.0
    if inp.question_type == "single-session-preference":
        return YesNoReply(reply="yes" if share >= RUBRIC else "no")
    if inp.question_type == "temporal-reasoning" and _numbers(inp.answer):
        wanted, given = _numbers(inp.answer), _numbers(inp.response)
        close = all(any(abs(w - g) <= 1 for g in given) for w in wanted)  # off by one tolerated
        return YesNoReply(reply="yes" if close else "no")
    return YesNoReply(reply="yes" if gold and share >= 1.0 else "no")
