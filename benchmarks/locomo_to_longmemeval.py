"""A LongMemEval-format file built from LoCoMo conversations (by default the two development ones).

LongMemEval gives every question its own history (an instance); LoCoMo asks many questions of one
conversation. Each LoCoMo question becomes one instance whose haystack is its whole conversation, one
session per ``session_N`` (id ``<sample>_session_N``, dated by ``session_N_date_time``), the first speaker
as ``user`` and the second as ``assistant``. The sessions holding the question's evidence turns are
its answer sessions, named as LongMemEval names them (``answer_<sample>_session_N``) with
``has_answer`` on their turns (true on the evidence turns); category 5 (adversarial) questions become
abstention questions (``_abs``). Question types: 1 → multi-session, 2 → temporal-reasoning, 3 and 4 →
single-session-user (an ``_abs`` question keeps single-session-user). The same sessions recur in every
instance of a conversation, as LongMemEval's do across instances.

    python benchmarks/locomo_to_longmemeval.py OUT.json [LOCOMO.json ...] [--per-conversation N]
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Sequence
from pathlib import Path

from clonemem.importers import importer
from clonemem.importers.base import ParsedPersona

# as the tests find them: CLONEMEM_LOCOMO_DEV, else the shared data folder
DEV = Path(os.environ.get("CLONEMEM_LOCOMO_DEV", "/work/shared/data/locomo-dev"))
TYPES = {
    "1": "multi-session",
    "2": "temporal-reasoning",
    "3": "single-session-user",
    "4": "single-session-user",
    "5": "single-session-user",
}


def _date(value: object) -> str:
    return value.strftime("%Y/%m/%d (%a) %H:%M")  # type: ignore[attr-defined]  # a datetime


def instances(persona: ParsedPersona, per_conversation: int | None = None) -> list[dict]:
    """One LongMemEval instance per question of one imported LoCoMo conversation."""
    release = persona.release
    sample = release.person_id
    sessions: dict[str, list] = {}
    for t in release.context:
        sessions.setdefault(t.session_key or "session_0", []).append(t)
    speakers = list(dict.fromkeys(t.speaker for t in release.context))
    out = []
    items = list(zip(release.items, persona.sources, strict=True))
    if per_conversation is not None and per_conversation < len(items):  # spread over all categories
        items = [items[i * len(items) // per_conversation] for i in range(per_conversation)]
    for q, source in items:
        evidence = set(q.digital_trace_ids)
        answer_keys = {
            key for key, turns in sessions.items() if any(t.id in evidence for t in turns)
        }
        ids, dates, haystack = [], [], []
        for key, turns in sessions.items():
            answer = key in answer_keys
            ids.append(f"answer_{sample}_{key}" if answer else f"{sample}_{key}")
            dates.append(_date(turns[0].session_date or turns[0].event_date))
            haystack.append(
                [
                    {
                        "role": "user" if t.speaker == speakers[0] else "assistant",
                        "content": t.content.split(": ", 1)[1] if ": " in t.content else t.content,
                        **({"has_answer": t.id in evidence} if answer else {}),
                    }
                    for t in turns
                ]
            )
        number = q.id.rsplit(":q", 1)[-1]
        category = source.category or "4"
        out.append(
            {
                "question_id": f"{sample}_q{number}" + ("_abs" if category == "5" else ""),
                "question_type": TYPES.get(category, "single-session-user"),
                "question": q.question,
                "answer": q.answer,
                "question_date": _date(q.question_time),
                "haystack_session_ids": ids,
                "haystack_dates": dates,
                "haystack_sessions": haystack,
                "answer_session_ids": [i for i in ids if i.startswith("answer_")],
            }
        )
    return out


def convert(sources: Sequence[Path], out: Path, per_conversation: int | None = None) -> int:
    """Write the LongMemEval-format file; returns the number of instances."""
    personas = importer("locomo").parse_paths(list(sources))
    items = [i for p in personas for i in instances(p, per_conversation)]
    out.write_text(json.dumps(items, ensure_ascii=False), "utf-8")
    return len(items)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument(
        "sources", type=Path, nargs="*", help="LoCoMo files (default: the development ones)"
    )
    parser.add_argument(
        "--per-conversation",
        type=int,
        default=None,
        help="at most N questions a conversation, evenly spread over its list",
    )
    args = parser.parse_args()
    sources = args.sources or sorted(DEV.glob("*.json"))
    print(
        json.dumps(
            {"instances": convert(sources, args.out, args.per_conversation), "out": str(args.out)}
        )
    )


if __name__ == "__main__":
    main()
