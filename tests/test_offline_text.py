"""The offline world's traces read like their media and do not repeat themselves (issue 13, part 4).

Measured with the same functions as `benchmarks/text_quality.py`, on one small persona per
language: under 1% of traces repeat an 8-word (en) or 12-character (zh) sequence within
themselves, every medium has its own recognisable form, and every trace still states every word of
the evidence it carries.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

from clonemem import text as textutil
from clonemem.generation.assemble import assemble
from clonemem.generation.execute import new_dags, run_inline
from clonemem.runtime import Runtime, use
from clonemem.schemas.config import RunConfig

_spec = importlib.util.spec_from_file_location(
    "text_quality", Path(__file__).resolve().parents[1] / "benchmarks" / "text_quality.py"
)
assert _spec and _spec.loader
tq = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(tq)

SMALL = {
    "major_events": 3,
    "phases_per_event": 2,
    "events_per_phase": 4,
    "traces_per_event": 4,
    "noise_traces_per_phase": 4,
}


@pytest.fixture(scope="module", params=["en", "zh"])
def tables(request) -> tuple[str, str, dict]:
    cfg = RunConfig.model_validate(
        {"name": f"text-{request.param}", "generation": {**SMALL, "language": request.param}}
    )
    rt, done = Runtime(cfg), []
    with use(rt):
        run_inline(new_dags(cfg), rt, done.append)
    assembly = assemble(done[0], cfg.name)
    assert assembly is not None
    return request.param, done[0].profile.name, assembly.rows.tables


def test_the_metric_sees_a_pasted_sentence() -> None:
    fact = "I finished the school science fair late in the evening at classroom 4B."
    assert tq.repeats(
        f"Long day. {fact} Also, I felt trapped when {fact[:-1].lower().replace('i ', 'I ', 1)}.",
        "en",
    )
    assert not tq.repeats(f"Long day. {fact[:-1]}, and I felt trapped.", "en")
    assert tq.repeats(
        "我婉拒了和海涛一起去的昂贵旅行。我感到轻松，就在我婉拒了和海涛一起去的昂贵旅行的时候。",
        "zh",
    )
    assert not tq.repeats("就在我婉拒了和海涛一起去的昂贵旅行的时候，我感到轻松。", "zh")
    assert tq.distinct_2(["a b a b"], "en") == round(2 / 3, 4)


def test_under_one_percent_of_traces_repeat_themselves(tables) -> None:
    language, _, t = tables
    traces = [(r["medium"], r["content"]) for r in t["traces"]]
    report = tq.report(traces, language, examples=3)
    assert len(traces) >= 100
    assert report["all"]["repeat_share"] < 0.01, report["repeating_examples"]


def test_traces_state_every_word_of_the_evidence_they_carry(tables) -> None:
    """Folding a feeling into its fact must not lose words: the containment the QA sufficiency check,
    the answerers and the judge rely on (English is also checked in test_generation)."""
    language, name, t = tables
    content = {r["trace_id"]: (r["medium"], r["content"]) for r in t["traces"]}
    statement = {r["evidence_id"]: r["statement"] for r in t["evidence"]}
    drop = {w.lower() for w in name.split()} | set(textutil.content_words(name))
    worst: dict[str, float] = {}
    for link in t["evidence_traces"]:
        medium, text = content[link["trace_id"]]
        words = {w for w in textutil.content_words(statement[link["evidence_id"]]) if w not in drop}
        have = set(textutil.content_words(text))
        worst[medium] = min(worst.get(medium, 1.0), len(words & have) / max(1, len(words)))
    for medium, score in worst.items():
        assert score >= (0.5 if medium == "search_history" else 0.8), (language, medium, score)


SPEAKER = re.compile(r"^[^:\n]{1,40}: \S")
CLOCK = re.compile(r"\b\d{2}:\d{2}\b")


def _by_medium(t: dict) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for r in t["traces"]:
        out.setdefault(r["medium"], []).append(r["content"])
    return out


def test_every_medium_has_its_own_form(tables) -> None:
    language, _, t = tables
    media = _by_medium(t)
    assert set(media) == {
        "diary",
        "social_media",
        "chat_private",
        "chat_group",
        "email",
        "memo",
        "search_history",
        "calendar_event",
    }
    me = "我" if language == "zh" else "Me"
    for text in media["search_history"]:  # queries, each with the time it was typed, in order
        lines = text.splitlines()
        assert len(lines) >= 2 and all(re.match(r"^\d{2}:\d{2}  \S", line) for line in lines), text
        assert all(len(line) < 120 and not line.endswith((".", "。")) for line in lines), text
    for text in media["calendar_event"]:  # an entry with a time span and a place
        assert re.search(r"\d{2}:\d{2}(-| to |至)\d{2}:\d{2}", text), text
    for medium in ("chat_private", "chat_group"):  # turns with speakers, the persona among them
        for text in media[medium]:
            lines = text.splitlines()
            turns = lines[1:] if medium == "chat_group" else lines
            if medium == "chat_group":
                assert re.fullmatch(r"\[.+\]|【.+】", lines[0]), text  # the group's name
            assert len(turns) >= 2 and all(SPEAKER.match(line) for line in turns), text
            assert any(line.startswith(f"{me}: ") for line in turns), text
            assert len({line.split(":")[0] for line in turns}) >= 2, text
    for text in media["email"]:  # subject, greeting, body, sign-off over the writer's name
        lines = text.splitlines()
        assert lines[0].startswith(("Subject: ", "主题：")) and len(lines) >= 5, text
        assert lines[-2].endswith((",", "，")), text
    for text in media["memo"]:  # a header, then items
        lines = text.splitlines()
        assert (
            len(lines) >= 2 and all(line.startswith("- ") for line in lines[1:]) or "\n" not in text
        ), text
    memos = [m for m in media["memo"] if "\n" in m]
    assert sum("- [ ]" in m for m in memos) >= 1  # to-do items appear
    for medium in ("diary", "social_media"):  # prose, not turns or lists
        for text in media[medium]:
            assert not any(
                SPEAKER.match(line) and line.startswith(f"{me}:") for line in text.splitlines()
            ), text
            assert not CLOCK.search(text), text
    assert sum("#" in text for text in media["social_media"]) >= len(media["social_media"]) // 2


def test_carried_traces_speak_in_the_first_person(tables) -> None:
    language, name, t = tables
    carried = [
        r
        for r in t["traces"]
        if not r["is_noise"] and r["medium"] in ("diary", "memo", "social_media")
    ]
    first = "我" if language == "zh" else "I"
    assert all(
        re.search(rf"(^|\W){first}(\W|$)" if language == "en" else first, r["content"])
        for r in carried
    )
    assert not any(name in r["content"] for r in carried)
