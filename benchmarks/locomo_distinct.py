"""Distinct LoCoMo-format conversations derived from the two development conversations (benchmark data).

Not LoCoMo's own conversations: this machine has only two of them (``26``, ``30`` in
``/work/shared/data/locomo-dev``, or ``CLONEMEM_LOCOMO_DEV``). Copies of those two hide work behind
caches keyed on text, so a measurement "on eight conversations" needs conversations that share no turn text. Each derived
conversation ``i`` is built deterministically (seed ``i``) from the sessions of both sources:

- sessions: all sessions of both sources, with their year shifted by ``i`` (months, days, times kept),
  merged in time order; sessions are then dropped at random until the conversation has at most
  ``turns`` turns (the two sources have 419 and 369; LoCoMo's eight other conversations, imported, have
  5,094 turns and 1,679 questions, about 637 and 210 each: by default at most 650 turns, 215 questions);
- speakers: both sources' pairs (Caroline/Melanie, Jon/Gina) become conversation ``i``'s own pair of
  names, in turns, captions, questions and answers alike;
- wording: a fixed table of everyday words (``WORDS``), each replaced in conversation ``i`` by one of its
  alternatives chosen by the seed, in every text of the conversation; years in texts shift by ``i``;
  a turn text still equal to one of an earlier conversation gets a short opener ("Well,", ...) until it
  is not (so no two conversations share a turn text);
- questions: a source question is kept when every turn its evidence names was kept (the evidence is
  renumbered to the new ``D<session>:<turn>`` ids, so it cites the same turn, reworded), then sampled
  down to at most ``questions`` per conversation; categories and adversarial answers are kept.
  Weekday-relative answers ("the Sunday before 25 May 2023") are not recomputed for the shifted year.

The result is one file in LoCoMo's release layout (``locomo10.json``: a list of samples with
``sample_id``, ``conversation``, ``qa``), imported with ``clonemem import locomo``.
"""

from __future__ import annotations

import json
import os
import random
import re
from pathlib import Path
from typing import Any

# as the tests find them: CLONEMEM_LOCOMO_DEV, else beside the checkout (``/work/main`` -> ``/work/shared``)
DEV = Path(os.environ.get("CLONEMEM_LOCOMO_DEV", "/work/shared/data/locomo-dev"))

SESSION = re.compile(r"^session_(\d+)$")
TURN_ID = re.compile(
    r"D\s*:?\s*(\d+)\s*:\s*(\d+)", re.IGNORECASE
)  # as the LoCoMo importer reads them
YEAR = re.compile(r"\b(20[0-3]\d)\b")
# each conversation's two speakers (the first stands for Caroline and Jon, the second for Melanie and Gina)
SPEAKERS = [
    ("Priya", "Tomas"),
    ("Aiko", "Marcus"),
    ("Lena", "Dev"),
    ("Sofia", "Kwame"),
    ("Nadia", "Oliver"),
    ("Yara", "Mateo"),
    ("Hana", "Felix"),
    ("Ines", "Rahul"),
    ("Maya", "Jonas"),
    ("Leila", "Tariq"),
    ("Elif", "Bruno"),
    ("Zara", "Emil"),
]
SOURCE_NAMES = {"26": ("Caroline", "Melanie", {"Mel": 1, "Caro": 0}), "30": ("Jon", "Gina", {})}
WORDS: dict[str, tuple[str, ...]] = {
    "great": ("wonderful", "fantastic", "terrific", "lovely"),
    "really": ("truly", "honestly", "so"),
    "amazing": ("incredible", "awesome", "stunning", "remarkable"),
    "happy": ("glad", "pleased", "delighted"),
    "awesome": ("brilliant", "superb", "fabulous"),
    "love": ("adore", "really like", "enjoy"),
    "thanks": ("thank you", "many thanks", "cheers"),
    "Thanks": ("Thank you", "Many thanks", "Cheers"),
    "hey": ("hi", "hello", "hiya"),
    "Hey": ("Hi", "Hello", "Hiya"),
    "cool": ("neat", "nice", "sweet"),
    "good": ("nice", "fine", "decent"),
    "nice": ("lovely", "pleasant", "good"),
    "wow": ("whoa", "oh wow", "gosh"),
    "Wow": ("Whoa", "Oh wow", "Gosh"),
    "glad": ("happy", "pleased", "relieved"),
    "tough": ("hard", "rough", "difficult"),
    "hard": ("tough", "difficult", "demanding"),
    "big": ("huge", "large", "major"),
    "friends": ("pals", "buddies", "mates"),
    "kids": ("children", "little ones", "youngsters"),
    "beautiful": ("gorgeous", "stunning", "lovely"),
    "excited": ("thrilled", "eager", "stoked"),
    "super": ("very", "extremely", "really"),
    "pretty": ("quite", "fairly", "rather"),
    "awesome!": ("brilliant!", "superb!"),
    "stuff": ("things", "bits"),
    "tell": ("share with", "let", "show"),
    "feel": ("sense", "find"),
    "lately": ("recently", "these days", "of late"),
    "important": ("vital", "key", "essential"),
    "support": ("backing", "encouragement", "help"),
    "keep": ("stay", "carry on"),
    "help": ("support", "aid", "assist"),
}
OPENERS = (
    "Well,",
    "Oh,",
    "So,",
    "Honestly,",
    "You know,",
    "Ah,",
    "Yeah,",
    "Hmm,",
    "Right,",
    "Anyway,",
    "Look,",
    "Okay,",
)


def load_sources(folder: Path = DEV) -> dict[str, dict[str, Any]]:
    return {p.stem: json.loads(p.read_text("utf-8")) for p in sorted(folder.glob("*.json"))}


def _rewriter(i: int, sources: dict[str, dict[str, Any]]) -> Any:
    """A function rewording every text of conversation ``i``: its speakers, its words, its years."""
    rng = random.Random(f"words-{i}")
    a, b = SPEAKERS[i % len(SPEAKERS)]
    names: dict[str, str] = {}
    for stem in sources:
        first, second, nicknames = SOURCE_NAMES.get(
            stem, (sources[stem]["speaker_a"], sources[stem]["speaker_b"], {})
        )
        names.update({first: a, second: b, **{n: (a, b)[which] for n, which in nicknames.items()}})
    choice = {w: rng.choice(alts) for w, alts in WORDS.items()}
    table = {**choice, **names}
    pattern = re.compile(
        r"\b(" + "|".join(re.escape(w) for w in sorted(table, key=len, reverse=True)) + r")\b"
    )

    def rewrite(text: str) -> str:
        text = pattern.sub(lambda m: table[m.group(1)], text)
        return YEAR.sub(lambda m: str(int(m.group(1)) + i), text)

    return rewrite


def _sessions(
    sources: dict[str, dict[str, Any]],
) -> list[tuple[str, int, str, list[dict[str, Any]]]]:
    """(source, session number, its date text, its turns) of every non-empty session of every source."""
    out = []
    for stem, doc in sources.items():
        for key in doc:
            m = SESSION.match(key)
            if m and doc[key]:
                out.append((stem, int(m.group(1)), doc[f"{key}_date_time"], doc[key]))
    return out


def _sort_key(date_text: str) -> tuple[int, int, int, int]:
    m = re.match(r"\s*(\d+):(\d+)\s*([ap])m on (\d+) (\w+),? (\d{4})", date_text)
    assert m, date_text
    hour, minute, half, day, month, year = m.groups()
    months = [
        "january",
        "february",
        "march",
        "april",
        "may",
        "june",
        "july",
        "august",
        "september",
        "october",
        "november",
        "december",
    ]
    hh = int(hour) % 12 + (12 if half == "p" else 0)
    return int(year), months.index(month.lower()) + 1, int(day), hh * 60 + int(minute)


def _reworded(value: Any, rewrite: Any, i: int) -> Any:
    """A question's field in conversation ``i``: texts reworded, a year given as a number shifted."""
    if isinstance(value, str):
        return rewrite(value)
    if isinstance(value, int) and not isinstance(value, bool) and 2000 <= value < 2040:
        return value + i
    return value


def conversation(
    i: int, sources: dict[str, dict[str, Any]], turns: int, questions: int, taken: set[str]
) -> dict[str, Any]:
    """Derived conversation ``i`` as a locomo10.json sample; ``taken`` holds the turn texts of earlier
    conversations (this one's are added)."""
    rng = random.Random(f"conversation-{i}")
    rewrite = _rewriter(i, sources)
    kept = _sessions(sources)
    while sum(len(s[3]) for s in kept) > turns:
        kept.pop(rng.randrange(len(kept)))
    kept.sort(key=lambda s: _sort_key(rewrite(s[2])))
    a, b = SPEAKERS[i % len(SPEAKERS)]
    conv: dict[str, Any] = {"speaker_a": a, "speaker_b": b}
    new_id: dict[tuple[str, str], str] = {}
    mine: set[str] = set()
    for n, (stem, old, date, session) in enumerate(kept, 1):
        conv[f"session_{n}_date_time"] = rewrite(date)
        out = []
        for j, turn in enumerate(session, 1):
            m = TURN_ID.fullmatch(turn["dia_id"].strip())
            if m:
                new_id[(stem, f"D{int(m.group(1))}:{int(m.group(2))}")] = f"D{n}:{j}"
            text = base = rewrite(turn["text"])
            for opener in rng.sample(OPENERS, len(OPENERS)) if text in taken else ():
                text = f"{opener} {base[:1].lower()}{base[1:]}"
                if text not in taken:
                    break
            assert text not in taken, turn["text"]
            mine.add(text)
            new = {"speaker": rewrite(turn["speaker"]), "dia_id": f"D{n}:{j}", "text": text}
            if turn.get("blip_caption"):
                new["blip_caption"] = rewrite(turn["blip_caption"])
            out.append(new)
        conv[f"session_{n}"] = out
    taken |= mine
    qa = []
    for stem, doc in sources.items():
        for item in doc.get("qa", []):
            refs = [
                (stem, f"D{int(s)}:{int(t)}")
                for e in item.get("evidence", [])
                if isinstance(e, str)
                for s, t in TURN_ID.findall(e)
            ]
            if len(refs) < len(item.get("evidence", [])) or any(r not in new_id for r in refs):
                continue  # evidence that names a dropped turn (or no turn): the question goes with it
            new_q = {k: _reworded(v, rewrite, i) for k, v in item.items() if k != "evidence"}
            new_q["evidence"] = list(dict.fromkeys(new_id[r] for r in refs))
            qa.append(new_q)
    if len(qa) > questions:
        qa = [qa[j] for j in sorted(rng.sample(range(len(qa)), questions))]
    return {"sample_id": f"derived-{i}", "conversation": conv, "qa": qa}


def derived_conversations(
    n: int, turns: int = 650, questions: int = 215, sources: dict[str, dict[str, Any]] | None = None
) -> list[dict[str, Any]]:
    """``n`` derived conversations (locomo10.json samples) sharing no turn text with one another."""
    sources = sources if sources is not None else load_sources()
    taken: set[str] = set()
    return [conversation(i, sources, turns, questions, taken) for i in range(n)]


def write_release(n: int, out: Path, turns: int = 650, questions: int = 215) -> Path:
    """The ``n`` conversations as one file in LoCoMo's release layout (``locomo10.json``)."""
    path = out / "locomo-derived.json"
    path.write_text(
        json.dumps(derived_conversations(n, turns, questions), ensure_ascii=False), "utf-8"
    )
    return path
