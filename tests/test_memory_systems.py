"""Mem0, A-Mem and O-Mem: built offline on one small generated persona and on scripted traces.

Checked: every retrieved item names existing traces, nothing comes from after the question's time,
evidence statements find their traces, Mem0 keeps superseded versions visible to earlier questions,
A-Mem links and evolves notes with the pre-evolution version still what an earlier question sees,
O-Mem's clue index answers with the rarest word, the offline steps do their job honestly, and Chinese
traces go through every system.
"""

from __future__ import annotations

import datetime as dt
import random
import time
from collections import defaultdict

import pytest

import clonemem.memory.memsys_stages as memsys_stages
from clonemem.generation.assemble import assemble
from clonemem.generation.execute import new_dags, run_inline
from clonemem.memory import SYSTEMS
from clonemem.memory.amem import AMem
from clonemem.memory.base import BuildContext, MemoryTrace, QuestionView, Retrieved
from clonemem.memory.mem0 import Mem0, when
from clonemem.memory.omem import OMem
from clonemem.offline import OfflineCall
from clonemem.offline.world import memsys as offline
from clonemem.runtime import Runtime, use
from clonemem.schemas.config import RunConfig
from clonemem.schemas.memsys import (
    AMemEvolveIn,
    AMemEvolveItem,
    AMemLinksIn,
    AMemNeighbourhood,
    AMemNoteIn,
    AMemNoteView,
    Mem0ExtractIn,
    Mem0UpdateIn,
    MemoryEntry,
    NewFact,
    OMemExtractIn,
    OMemItem,
    OMemRouteIn,
    TraceView,
)
from clonemem.stages import STAGES
from tests.memory_kit import REMOTE, day, trace

NAMES = ("mem0", "amem", "omem")
# One major event: 22 traces and 18 evidence statements with traces. A-Mem embeds each note twice
# (written, then as evolved), most of the module's time: a second major event cost 8 s more of it.
SMALL = {
    "generation": {
        "major_events": 1,
        "phases_per_event": 2,
        "events_per_phase": 3,
        "traces_per_event": 3,
        "noise_traces_per_phase": 2,
    }
}


def build(system, traces, rt: Runtime, language: str = "en") -> BuildContext:
    ctx = BuildContext(
        llm=lambda name, inp: STAGES.get(name).run(rt.model("extractor"), inp), language=language
    )
    with use(rt):
        system.build(traces, ctx)
    return ctx


def ask(system, question: str, at: dt.datetime, k: int = 10) -> list[Retrieved]:
    return system.retrieve(QuestionView(question_id="q", question=question, question_time=at), k)


@pytest.fixture(scope="module", autouse=True)
def one_embedding_thread():
    """Embed on one thread in this module. Test processes share the CPU, and on a busy machine the
    embedding engine's threads wait for each other: embedding gets several times slower (a single
    query up to 30x), while one thread is barely slower on an idle machine."""
    from clonemem.memory import embed

    with embed.threads(1):
        yield


@pytest.fixture(scope="module")
def rt() -> Runtime:
    return Runtime(RunConfig())


@pytest.fixture(scope="module")
def persona():
    config = RunConfig.model_validate(SMALL)
    runtime = Runtime(config)
    done = []
    with use(runtime):
        run_inline(new_dags(config), runtime, done.append)
    rows = assemble(done[0], "t").rows.tables
    traces = [
        MemoryTrace(r["trace_id"], r["medium"], r["event_date"], r["content"])
        for r in rows["traces"]
    ]
    by_evidence = defaultdict(set)
    for r in rows["evidence_traces"]:
        by_evidence[r["evidence_id"]].add(r["trace_id"])
    evidence = [
        (e["statement"], by_evidence[e["evidence_id"]])
        for e in rows["evidence"]
        if by_evidence[e["evidence_id"]]
    ]
    return runtime, traces, evidence


@pytest.fixture(scope="module")
def built(persona):
    from clonemem.memory.embed import encode

    runtime, traces, _ = persona
    encode(["load the model before timing the builds"])
    out = {}
    for name in NAMES:
        system = SYSTEMS.get(name)()
        started = time.perf_counter()
        ctx = build(system, traces, runtime)
        out[name] = (system, ctx.stats, time.perf_counter() - started)
    return out


# -- the generated persona ----------------------------------------------------------------------


def test_systems_are_registered_llm_systems(built):
    for name, cls in (("mem0", Mem0), ("amem", AMem), ("omem", OMem)):
        system, stats, seconds = built[name]
        assert isinstance(system, cls) and cls.name == name and cls.llm_stages
        assert stats["llm_calls"] > 0 and stats["items"] > 0, (name, stats)
        print(f"{name}: built in {seconds:.2f} s, {stats}")


def test_every_item_names_existing_traces_from_before_the_question(persona, built):
    _, traces, evidence = persona
    dates = {t.trace_id: t.event_date for t in traces}
    ordered = sorted(dates.values())
    middle = ordered[len(ordered) // 2]
    queries = [
        "How did I feel about work?",
        "What did I believe about working weekends?",
        *(s for s, _ in evidence[::9]),
    ]
    for name in NAMES:
        system = built[name][0]
        seen = 0
        for q in queries:
            got = ask(system, q, middle)
            assert len(got) <= 10
            for item in got:
                assert item.trace_ids and all(t in dates for t in item.trace_ids), (name, item)
                assert all(dates[t] <= middle for t in item.trace_ids), (name, item)
                seen += 1
        assert seen, name
        assert ask(system, queries[0], ordered[0] - dt.timedelta(days=1)) == [], name


def test_evidence_statements_find_their_traces(persona, built):
    _, traces, evidence = persona
    dates = {t.trace_id: t.event_date for t in traces}
    sample = random.Random(7).sample(evidence, 10)
    for name in NAMES:
        system = built[name][0]
        hits = 0
        for statement, ids in sample:
            at = max(dates[t] for t in ids)
            got = {t for item in ask(system, statement, at, 10) for t in item.trace_ids}
            hits += bool(got & ids)
        assert hits > len(sample) // 2, (
            f"{name}: {hits}/{len(sample)} evidence statements found their traces"
        )


# -- Mem0: operations and versions ------------------------------------------------------------------


def test_mem0_updates_keep_versions_for_earlier_questions(rt):
    system = Mem0()
    stats = build(system, REMOTE, rt).stats
    ops = stats["operations"]
    assert ops["ADD"] == 2 and ops["NONE"] == 1 and ops["UPDATE"] == 1 and ops["DELETE"] == 1, ops
    assert stats["superseded"] == 2 and stats["live"] == 1

    q = "Does remote work make me more productive?"
    before_update = ask(system, q, day("2023-02-20"))
    assert before_update[0].text == "I think remote work makes me more productive."
    assert before_update[0].trace_ids == ("r1",)  # NONE: the repeat changed nothing
    after_update = ask(system, q, day("2023-04-01"))
    assert after_update[0].text == "I think remote work makes me more productive and calmer."
    assert after_update[0].trace_ids == (
        "r3",
        "r1",
    )  # an UPDATE keeps the old sources, after the new one
    assert {r.text for r in after_update} == {
        after_update[0].text,
        "I adopted a grey cat called Pixel.",
    }
    after_delete = ask(system, q, day("2023-06-01"))
    assert [r.trace_ids for r in after_delete] == [("c1",)]
    assert all(r.kind == "fact" for r in before_update + after_update + after_delete)


def test_mem0_build_is_deterministic(rt):
    a, b = Mem0(), Mem0()
    sa, sb = build(a, REMOTE, rt).stats, build(b, REMOTE, rt).stats
    assert sa == sb
    q = QuestionView("q", "remote work", day("2023-04-01"))
    assert a.retrieve(q, 5) == b.retrieve(q, 5)


SAME_DAY = [
    trace("d1", "2023-06-01T09:00:00", "I adopted a grey cat called Pixel."),
    trace("d2", "2023-06-01T12:00:00", "I think remote work makes me more productive."),
    trace("d3", "2023-06-01T18:00:00", "I no longer think remote work makes me more productive."),
]


def test_one_call_per_group_yet_each_change_dated_by_its_trace(rt):
    """A day's traces go to each step in one call; a question between them still sees the memory as it
    was after the traces before it, never a change a later trace of the same group caused."""
    mem0 = Mem0()
    stats = build(mem0, SAME_DAY, rt).stats
    assert stats["groups"] == 1 and stats["llm_calls"] == 2
    ids = lambda at: {t for item in mem0.stored(day(at)) for t in item.trace_ids}  # noqa: E731
    assert ids("2023-06-01T10:00") == {"d1"} and ids("2023-06-01T13:00") == {"d1", "d2"}
    assert ids("2023-06-01T19:00") == {"d1"}  # d3 deleted the opinion d2 stated
    assert ask(mem0, "remote work", day("2023-06-01T13:00"))[0].trace_ids == ("d2",)

    omem = OMem()
    assert build(omem, SAME_DAY, rt).stats["llm_calls"] == 2

    def opinion(at: str) -> list[tuple[str, tuple[str, ...]]]:
        return [(i.text, i.trace_ids) for i in omem.stored(day(at)) if i.kind == "attribute"]

    assert opinion("2023-06-01T13:00") == [
        ("I think remote work makes me more productive.", ("d2",))
    ]
    assert opinion("2023-06-01T19:00") == [
        ("I no longer think remote work makes me more productive.", ("d3", "d2"))
    ]
    assert opinion("2023-06-01T10:00") == []

    amem = AMem()
    stats = build(amem, SAME_DAY, rt).stats
    assert stats["llm_calls"] <= 3 and stats["links"] >= 1, stats
    noon, evening = when(day("2023-06-01T13:00")), when(day("2023-06-01T19:00"))
    assert amem.linked_at(1, noon) == [] and 2 in amem.linked_at(1, evening)
    assert amem.version_at(1, noon) != amem.version_at(1, evening)
    assert amem.version_at(2, noon) is None


@pytest.mark.parametrize("name", NAMES)
def test_same_inputs_same_memory_and_rankings(rt, name):
    traces = [*REMOTE, *SKETCH, *SAME_DAY]
    a, b = SYSTEMS.get(name)(), SYSTEMS.get(name)()
    assert (
        build(a, traces, rt).stats == build(b, list(reversed(traces)), rt).stats
    )  # input order does not matter
    assert a.stored() == b.stored()
    for at in ("2023-02-20", "2023-06-01T13:00", "2023-07-01"):
        q = QuestionView("q", "remote work and the sketch club", day(at))
        assert a.retrieve(q, 5) == b.retrieve(q, 5)


# -- A-Mem: links and evolution ---------------------------------------------------------------------

SKETCH = [
    trace(
        "s1",
        "2023-01-10T10:00:00",
        "I joined the harbour sketch club and drew the old ferry terminal.",
    ),
    trace("s2", "2023-01-15T20:00:00", "Rain all day. I read on the sofa and made tea."),
    trace(
        "s3",
        "2023-02-10T16:00:00",
        "I drew the old ferry terminal again with the harbour sketch club. "
        "I felt proud of my watercolour. #newchapter",
        "social_media",
    ),
]


def test_amem_links_and_evolves_with_versions(rt):
    system = AMem()
    stats = build(system, SKETCH, rt).stats
    assert stats["links"] >= 1 and stats["evolutions"] >= 1, stats
    early, late = when(day("2023-01-20")), when(day("2023-02-20"))
    assert system.linked_at(0, early) == [] and 2 in system.linked_at(0, late)
    old, new = system.version_at(0, early), system.version_at(0, late)
    assert old != new
    assert (
        "newchapter" not in system.v_tags[old] and "newchapter" in system.v_tags[new]
    )  # the neighbour's tags changed
    assert system.v_context[new] != system.v_context[old]

    q = "the harbour sketch club at the ferry terminal"
    before = ask(system, q, day("2023-01-20"), 2)
    assert (
        before[0].trace_ids == ("s1",) and "newchapter" not in before[0].text
    )  # the pre-evolution note
    assert all(r.trace_ids != ("s3",) for r in before)
    after = ask(system, q, day("2023-02-20"), 2)
    assert {r.trace_ids for r in after} == {("s1",), ("s3",)}  # the top hit and its linked note
    s1 = next(r for r in after if r.trace_ids == ("s1",))
    assert "newchapter" in s1.text and s1.kind == "note"


# -- O-Mem: clue index, topics, persona memory ------------------------------------------------------

RIVER = [
    trace(
        "o1",
        "2023-01-05T07:00:00",
        "I went running by the river with Ana. The river path was muddy.",
    ),
    trace(
        "o2",
        "2023-01-12T07:00:00",
        "I went running along the canal again. I believe early runs clear my head.",
    ),
    trace(
        "o3",
        "2023-01-20T07:00:00",
        "I went running by the river and saw a heron near the old bridge.",
    ),
    trace("o4", "2023-02-01T07:00:00", "I went running in the park before work."),
]


def test_omem_clue_index_returns_the_rarest_word(rt):
    system = OMem()
    stats = build(system, RIVER, rt).stats
    assert stats["topics"] >= 1 and stats["clue_words"] > 5
    q = "When did I see the heron while running by the river?"
    word, items = system.clue(q, when(day("2023-03-01")))
    assert word == "heron" and [system.traces[i].trace_id for i in items] == ["o3"]
    word, items = system.clue(q, when(day("2023-01-15")))  # no heron yet: river is now the rarest
    assert word == "river" and [system.traces[i].trace_id for i in items] == ["o1"]
    got = ask(system, q, day("2023-03-01"), 5)
    assert ("o3",) in [r.trace_ids for r in got[:3]]
    assert all(r.trace_ids for r in got)
    # the belief is a persona attribute, the outings are events
    assert any("early runs clear my head" in t for t in system.attributes.texts)
    assert not any("early runs" in t for t in system.facts.texts)
    assert any("heron" in t for t in system.facts.texts)


# -- the offline steps ----------------------------------------------------------------------------


def call(stage: str, inputs) -> object:
    return STAGES.get(stage).offline_handler()(
        OfflineCall(stage=stage, inputs=inputs, rng=random.Random(0), model="offline")
    )


def tv(content: str, medium: str = "diary", date: str = "2023-01-01", id_: str = "t0") -> TraceView:
    return TraceView(id=id_, medium=medium, event_date=date, content=content)


def test_every_step_is_defined_with_a_handler_and_renders():
    assert {s.name for s in memsys_stages.ALL} == {
        "memory.mem0_extract",
        "memory.mem0_update",
        "memory.amem_note",
        "memory.amem_links",
        "memory.amem_evolve",
        "memory.omem_extract",
        "memory.omem_route",
    }
    view = AMemNoteView(
        id="1",
        timestamp="2023-01-01T00:00:00",
        content="我去跑步了。",
        keywords=["跑步"],
        context="日记",
        tags=["健康"],
    )
    other = view.model_copy(update={"id": "0"})
    samples = {
        "memory.mem0_extract": Mem0ExtractIn(
            traces=[tv("我去跑步了。")], recent=["之前的记录"], language="zh"
        ),
        "memory.mem0_update": Mem0UpdateIn(
            facts=[NewFact(id="f0", text="I run.", event_date="2023-01-01")],
            memories=[MemoryEntry(id="0", text="I swim.")],
        ),
        "memory.amem_note": AMemNoteIn(traces=[tv("I ran.")]),
        "memory.amem_links": AMemLinksIn(
            items=[AMemNeighbourhood(note=view, neighbours=[other])], language="zh"
        ),
        "memory.amem_evolve": AMemEvolveIn(
            items=[AMemEvolveItem(note=view, neighbours=[other], linked=["0"])]
        ),
        "memory.omem_extract": OMemExtractIn(traces=[tv("I ran.", "memo")]),
        "memory.omem_route": OMemRouteIn(
            items=[
                OMemItem(id="i0", kind="attribute", text="I like running.", event_date="2023-01-01")
            ]
        ),
    }
    for stage in memsys_stages.ALL:
        inp = samples[stage.name]
        prompt = stage.render(inp)
        assert stage.role == "extractor" and prompt.system and prompt.user
        for field in stage.output.model_fields:
            assert f'"{field}"' in prompt.user, (
                stage.name,
                field,
            )  # the prompt asks for every field
        (list_field,) = stage.output.model_fields.values()  # one list of per-item objects
        item_type = list_field.annotation.__args__[0]
        for field in item_type.model_fields:
            assert f'"{field}"' in prompt.user, (
                stage.name,
                field,
            )  # ... and every field of an item
        assert isinstance(call(stage.name, inp), stage.output)
    assert "Chinese" in memsys_stages.MEM0_EXTRACT.render(samples["memory.mem0_extract"]).user


def extract(content: str, medium: str = "diary", language: str = "en") -> list[str]:
    out = call(
        "memory.mem0_extract", Mem0ExtractIn(traces=[tv(content, medium)], language=language)
    )
    assert all(f.trace == "t0" for f in out.facts)
    return [f.text for f in out.facts]


def test_statements_are_the_writers_own():
    content = (
        "the sketch club group\nMe: I presented the science fair to the team.\n"
        "Mateo: I loved it, you should be proud!\nMe: Thanks, talk soon.\nMe: Also, I felt proud. #win"
    )
    assert extract(content, "chat_group") == [
        "I presented the science fair to the team.",
        "I felt proud.",
    ]
    email = "Subject: Quick update\nHi Ravi,\nSmall update: I started a pottery class.\nBest,\nTheo"
    assert offline.statements(email, "email") == ["I started a pottery class."]
    zh = "【社区合唱团】\n我: 我周日深夜还在回复鹏飞的邮件。\n鹏飞: 这周末要不要见面聊聊？\n我: 好的，一定。"
    assert offline.statements(zh, "chat_group", "zh") == ["我周日深夜还在回复鹏飞的邮件。"]


def test_conversation_turns_keep_each_speakers_statements_attributed():
    """A recorded conversation (LoCoMo) has no single writer: what a speaker states is a fact about them,
    attributed, including elliptical statements and shared photos; questions and small talk are not."""
    turn = (
        "Caroline: Wow, Melanie! Researching adoption agencies - it's been a dream to have a family. "
        "What about you? [shares a photo: a photo of a brochure on a table]"
    )
    assert extract(turn, "conversation_turn") == [
        "Caroline: Researching adoption agencies - it's been a dream to have a family.",
        "Caroline: Shared a photo: a photo of a brochure on a table.",
    ]
    assert extract(
        "Melanie: Yeah, I painted that lake sunrise last year! Thanks, Caroline!",
        "conversation_turn",
    ) == ["Melanie: Yeah, I painted that lake sunrise last year!"]
    assert extract("Melanie: You'd be a great counselor! Good luck!", "conversation_turn") == []
    # in a person's own chat, other people's lines are still not the person's facts ...
    assert (
        extract(
            "Caroline: I painted that lake sunrise last year!\nMe: Wow, lovely!", "chat_private"
        )
        == []
    )
    # ... but a chat in which the writer never speaks is a recorded conversation (LoCoMo exported as chat)
    assert extract("Caroline: I painted that lake sunrise last year!", "chat_private") == [
        "Caroline: I painted that lake sunrise last year!"
    ]


def update(fact: str, memories: list[MemoryEntry], *more: str):
    facts = [
        NewFact(id=f"f{n}", text=f, event_date="2023-01-01") for n, f in enumerate((fact, *more))
    ]
    return call("memory.mem0_update", Mem0UpdateIn(facts=facts, memories=memories)).operations


@pytest.mark.parametrize(
    ("fact", "expected"),
    [
        ("I think remote work makes me more productive.", "NONE"),  # near-duplicate
        ("I think remote work makes me more productive and calmer.", "UPDATE"),  # more information
        (
            "I think remote work makes me lonely but productive.",
            "UPDATE",
        ),  # same subject, changed content
        ("I no longer think remote work makes me more productive.", "DELETE"),  # explicit reversal
        ("I adopted a grey cat called Pixel.", "ADD"),
    ],
)
def test_mem0_update_compares_with_the_memories(fact, expected):
    memories = [
        MemoryEntry(id="0", text="I like swimming."),
        MemoryEntry(id="1", text="I think remote work makes me more productive."),
    ]
    (op,) = update(fact, memories)
    assert op.event == expected and op.facts == ["f0"]
    if expected in ("UPDATE", "DELETE"):
        assert op.id == "1"
    if expected in ("UPDATE", "ADD"):
        assert op.text == fact


def test_mem0_update_works_through_the_group_in_order():
    """Later facts of a group see what the reply added or changed for earlier ones; statements about
    different speakers never merge; pronouns alone make no similarity."""
    ops = update(
        "I adopted a grey cat called Pixel.",
        [],
        "I adopted a grey cat called Pixel and a dog.",
        "I no longer have a grey cat called Pixel and a dog.",
    )
    assert [(o.event, o.id) for o in ops] == [
        ("ADD", "new0"),
        ("UPDATE", "new0"),
        ("DELETE", "new0"),
    ]
    memories = [MemoryEntry(id="4", text="Caroline: I love painting sunsets.")]
    assert update("Melanie: I love painting sunsets.", memories)[0].event == "ADD"
    assert update("Caroline: I love painting sunsets.", memories)[0].event == "NONE"
    assert (
        update(
            "I'm so excited about the trip!", [MemoryEntry(id="0", text="I'm so excited for you.")]
        )[0].event
        == "ADD"
    )


def test_omem_route_and_extraction():
    existing = [MemoryEntry(id="a3", text="I believe early runs clear my head.")]

    def route(item: str, kind: str = "attribute"):
        (r,) = call(
            "memory.omem_route",
            OMemRouteIn(
                items=[OMemItem(id="i0", kind=kind, text=item, event_date="2023-01-01")],
                attributes=existing,
            ),
        ).routes
        assert r.item == "i0"
        return r

    assert route("I believe early runs clear my head.").op == "IGNORE"
    assert (
        route("I believe early runs clear my head.", "fact").op == "ADD"
    )  # only entries of its kind
    assert (
        route("I no longer believe early runs clear my head.").op,
        route("I no longer believe early runs clear my head.").id,
    ) == ("UPDATE", "a3")
    assert route("I love cooking for friends.").op == "ADD"
    (ex,) = call(
        "memory.omem_extract",
        OMemExtractIn(
            traces=[
                tv(
                    "I presented the school science fair to the team. I came to believe the school science fair "
                    "matters. I feel tired."
                )
            ]
        ),
    ).interactions
    assert ex.id == "t0" and ex.facts == ["I presented the school science fair to the team."]
    assert ex.attributes == ["I came to believe the school science fair matters.", "I feel tired."]
    assert ex.topics[0] == "school science fair" and "science" in ex.keywords


def test_amem_note_and_evolution_come_from_the_text():
    (note,) = call(
        "memory.amem_note",
        AMemNoteIn(
            traces=[
                tv(
                    "I drew the ferry terminal with the sketch club. #newchapter",
                    "social_media",
                    "2023-02-10T16:00:00",
                )
            ]
        ),
    ).notes
    assert note.id == "t0" and {"ferry", "terminal", "sketch"} <= set(note.keywords)
    assert "newchapter" in note.tags and "hobbies" in note.tags and "social_media" in note.tags
    assert "I drew the ferry terminal" in note.context
    new = AMemNoteView(
        id="2",
        timestamp="2023-02-10T16:00:00",
        content="...",
        keywords=note.keywords,
        context=note.context,
        tags=note.tags,
    )
    old = AMemNoteView(
        id="0",
        timestamp="2023-01-10T10:00:00",
        content="I joined the sketch club.",
        keywords=["joined", "sketch", "club"],
        context="Diary from 2023-01-10: I joined the sketch club.",
        tags=["hobbies", "diary"],
    )
    other = old.model_copy(update={"id": "1"})
    evo = call(
        "memory.amem_evolve",
        AMemEvolveIn(items=[AMemEvolveItem(note=new, neighbours=[old, other], linked=["0"])]),
    )
    assert [(u.note, u.id) for u in evo.updates] == [
        ("2", "0")
    ]  # only the linked neighbour evolves
    upd = evo.updates[0]
    assert (
        upd.tags[:2] == ["hobbies", "diary"]
        and "newchapter" in upd.tags
        and "social_media" not in upd.tags
    )
    assert upd.context.startswith(old.context) and note.context in upd.context
    # a second new note in the same group builds on the first one's update of the neighbour
    later = new.model_copy(
        update={
            "id": "3",
            "timestamp": "2023-02-10T18:00:00",
            "tags": ["travel"],
            "context": "Memo from 2023-02-10: I booked the ferry.",
        }
    )
    evo = call(
        "memory.amem_evolve",
        AMemEvolveIn(
            items=[
                AMemEvolveItem(note=new, neighbours=[old], linked=["0"]),
                AMemEvolveItem(note=later, neighbours=[old], linked=["0"]),
            ]
        ),
    )
    assert [(u.note, u.id) for u in evo.updates] == [("2", "0"), ("3", "0")]
    assert {"newchapter", "travel"} <= set(evo.updates[1].tags)
    assert evo.updates[1].context.endswith("I booked the ferry.")


# -- Chinese ----------------------------------------------------------------------------------------

ZH = [
    trace("z1", "2023-01-05T20:00:00", "我周日深夜还在回复鹏飞的邮件。我感到烦躁易怒。"),
    trace(
        "z2",
        "2023-01-09T12:00:00",
        "我: 我开始觉得工资越高生活就越好。\n鹏飞: 这周末要不要见面聊聊？",
        "chat_private",
    ),
    trace("z3", "2023-02-01T09:00:00", "我不再觉得工资越高生活就越好。#新开始", "social_media"),
    trace("z4", "2023-02-03T09:00:00", "购物：燕麦、西红柿、咖啡", "memo"),
]


@pytest.mark.parametrize("name", NAMES)
def test_chinese_traces(rt, name):
    system = SYSTEMS.get(name)()
    stats = build(system, ZH, rt, language="zh").stats
    assert stats["llm_calls"] > 0
    got = ask(system, "我对工资和生活的看法是什么？", day("2023-01-20"), 5)
    assert got and all(set(r.trace_ids) <= {"z1", "z2"} for r in got)
    assert ask(system, "鹏飞的邮件", day("2023-03-01"), 5)
