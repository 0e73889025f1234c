"""A synthetic file in LongMemEval's layout and of its sizes (the real files are not on this machine).

``longmemeval_s`` holds ~500 instances of ~50 haystack sessions (~115k tokens, ~460k characters each,
~270 MB of JSON), drawn from a shared pool of sessions, as the real one draws them from its pool, plus
one to three answer sessions of the instance's own with ``has_answer`` turns; ``longmemeval_m`` holds
~500 sessions per instance. Deterministic (seeded); written instance by instance (never held whole).

    python benchmarks/longmemeval_synthetic.py OUT.json [--instances 500] [--sessions 50] [--pool 500]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import random
from pathlib import Path

WORDS = (
    "morning meeting project deadline sister coffee train weekend garden letter worried excited tired "
    "proud decision apartment rent doctor walk river friend dinner promotion manager plan trip recipe "
    "argument apology music class sketch painting budget savings python laptop marathon guitar"
).split()
TYPES = (
    "single-session-user",
    "single-session-assistant",
    "single-session-preference",
    "temporal-reasoning",
    "knowledge-update",
    "multi-session",
)
TURNS_PER_SESSION = 10
CHARS_PER_TURN = 1050  # ~10 turns x 1050 characters: ~10.5k characters (~2.6k tokens) a session
START = dt.datetime(2023, 1, 1, 8, 0)


def _text(rng: random.Random, chars: int) -> str:
    words: list[str] = []
    size = 0
    while size < chars:
        word = rng.choice(WORDS)
        words.append(word)
        size += len(word) + 1
    return " ".join(words) + "."


def _session(rng: random.Random, answer_turn: int | None = None) -> list[dict]:
    turns = []
    for n in range(TURNS_PER_SESSION):
        turn: dict = {
            "role": "user" if n % 2 == 0 else "assistant",
            "content": _text(rng, rng.randint(CHARS_PER_TURN // 2, CHARS_PER_TURN * 3 // 2)),
        }
        if answer_turn is not None:
            turn["has_answer"] = n == answer_turn
        turns.append(turn)
    return turns


def _date(when: dt.datetime) -> str:
    return when.strftime("%Y/%m/%d (%a) %H:%M")


def write(
    out: Path, instances: int = 500, sessions: int = 50, pool: int = 500, seed: int = 11
) -> dict:
    """Write the file; returns its shape (instances, sessions per instance, pool, bytes)."""
    rng = random.Random(seed)
    shared = [(f"sharegpt_{i:05d}", _session(rng)) for i in range(pool)]
    with out.open("w", encoding="utf-8") as fh:
        fh.write("[")
        for i in range(instances):
            qid = f"{i:08x}" + ("_abs" if i % 30 == 29 else "")
            answers = [
                (
                    f"answer_{i:08x}_{a}",
                    _session(rng, answer_turn=rng.randrange(0, TURNS_PER_SESSION, 2)),
                )
                for a in range(1 + i % 3)
            ]
            haystack = rng.sample(shared, min(pool, sessions - len(answers))) + answers
            rng.shuffle(haystack)
            hours = sorted(
                rng.sample(range(24 * 600), len(haystack))
            )  # ~20 months, one session an hour at most
            dates = [START + dt.timedelta(hours=h, minutes=rng.randrange(0, 60)) for h in hours]
            instance = {
                "question_id": qid,
                "question_type": TYPES[i % len(TYPES)],
                "question": "What did I say about "
                + " ".join(rng.choice(WORDS) for _ in range(6))
                + "?",
                "answer": _text(rng, 40),
                "question_date": _date(dates[-1] + dt.timedelta(days=3)),
                "haystack_session_ids": [sid for sid, _ in haystack],
                "haystack_dates": [_date(d) for d in dates],
                "haystack_sessions": [turns for _, turns in haystack],
                "answer_session_ids": [sid for sid, _ in answers],
            }
            fh.write(("," if i else "") + json.dumps(instance, ensure_ascii=False))
        fh.write("]")
    return {
        "instances": instances,
        "sessions_per_instance": sessions,
        "pool": pool,
        "bytes": out.stat().st_size,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--instances", type=int, default=500)
    parser.add_argument("--sessions", type=int, default=50)
    parser.add_argument("--pool", type=int, default=500)
    args = parser.parse_args()
    print(json.dumps(write(args.out, args.instances, args.sessions, args.pool)))


if __name__ == "__main__":
    main()
