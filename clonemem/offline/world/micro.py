"""Stage III offline handlers: detailed events with co-generated evidence, two-step traces, noise."""

from __future__ import annotations

import datetime as dt
import random

from clonemem import text as textutil
from clonemem.offline import OfflineCall
from clonemem.offline.world.common import (
    People,
    arc_state,
    archetype_of,
    cap,
    fill,
    first_name,
    first_person,
    lexicon,
    persona_slots,
    pick,
)
from clonemem.offline.world.meso import phase_state_index
from clonemem.schemas.generation import (
    ArcBrief,
    DetailedEvent,
    DetailedEventsInput,
    DetailedEventsOut,
    EvidenceDraft,
    NoisePlansInput,
    TraceContent,
    TracePlan,
    TracePlansInput,
    TracePlansOut,
    TraceWriteInput,
)

# Media that can only carry factual evidence (no room for feelings or opinions).
FACT_ONLY = frozenset({"search_history", "calendar_event"})


def _dates(start: dt.date, end: dt.date, n: int, rng: random.Random) -> list[dt.date]:
    span = max(0, (end - start).days)
    return sorted(start + dt.timedelta(days=rng.randint(0, span)) for _ in range(n))


def detailed_events(call: OfflineCall) -> DetailedEventsOut:
    inp = call.inputs
    assert isinstance(inp, DetailedEventsInput)
    lex, rng = lexicon(inp.language), call.rng
    by_dim: dict[str, list[ArcBrief]] = {}
    for arc in inp.arcs:
        by_dim.setdefault(arc.dimension, []).append(arc)
    primary = next((a for a in inp.arcs if a.key == inp.primary_arc), inp.arcs[0])
    events = []
    for date in _dates(inp.phase.start_date, inp.phase.end_date, inp.count, rng):
        slots = persona_slots(inp.persona, inp.relations, lex, rng)
        # most days of a phase are about its primary arc; some about the persona's other threads
        focus = primary if rng.random() < 0.6 else pick(rng, inp.arcs)  # type: ignore[arg-type]
        arche, state = arc_state(focus, lex, phase_state_index(focus, inp.phase_index, inp.phase_count))
        if rng.random() < 0.5 and state.facts:
            fact = fill(pick(rng, state.facts), slots)
            activity = fact.removeprefix(slots["first"]).strip()
        else:
            activity = fill(pick(rng, lex.domain_activities.get(arche.domain, lex.domain_activities["hobby"])), slots)
            fact = fill(lex.s("evidence_fact_activity"), {**slots, "activity": activity})
        evidence = [EvidenceDraft(kind="fact", statement=_sentence(fact), arc_keys=[focus.key])]
        emo_arc = pick(rng, by_dim.get("emotion", [focus]))  # type: ignore[arg-type]
        _, emo_state = arc_state(emo_arc, lex, phase_state_index(emo_arc, inp.phase_index, inp.phase_count))
        feeling = pick(rng, emo_state.feelings + state.feelings)
        evidence.append(EvidenceDraft(
            kind="emotion", arc_keys=sorted({emo_arc.key, focus.key}),
            statement=_sentence(fill(lex.s("evidence_emotion"), {**slots, "feeling": feeling,
                                                                 "context": slots["subj"] + ("" if lex.language == "zh" else " ") + activity})),
        ))
        op_arc = pick(rng, by_dim.get("opinion", [focus]))  # type: ignore[arg-type]
        _, op_state = arc_state(op_arc, lex, phase_state_index(op_arc, inp.phase_index, inp.phase_count))
        template = lex.s("evidence_opinion") if rng.random() < 0.6 else lex.s("evidence_opinion_alt")
        evidence.append(EvidenceDraft(kind="opinion", arc_keys=[op_arc.key],
                                      statement=_sentence(fill(template, {**slots, "belief": pick(rng, op_state.beliefs)}))))
        for extra in state.facts[: max(0, inp.evidence_per_event - 3)]:
            evidence.append(EvidenceDraft(kind="fact", arc_keys=[focus.key], statement=_sentence(fill(extra, slots))))
        people = sorted({p for p in People.of(inp.relations).everyone if p in fact + activity})
        events.append(DetailedEvent(
            date=date, title=cap(_clip(activity)), people=people, place=slots["place"],
            description=fill(lex.s("detailed_event_description"), {**slots, "date": date.isoformat(), "activity": activity}),
            evidence=evidence[: max(inp.evidence_per_event, 1)],
        ))
    return DetailedEventsOut(events=events)


def _sentence(text: str) -> str:
    text = text.strip()
    return text if text.endswith((".", "!", "?", "。", "！", "？")) else text + ("。" if _is_cjk(text) else ".")


def _is_cjk(text: str) -> bool:
    return any("\u4e00" <= ch <= "\u9fff" for ch in text)


def _clip(text: str) -> str:
    """A title from an activity phrase: the phrase without its trailing company or place."""
    text = text.rstrip(".。")
    if _is_cjk(text):
        return text[:28]
    for cut in (" with ", " at ", " after ", " because "):
        head = text.split(cut)[0]
        if len(head.split()) >= 3:
            text = head
    return text


def _media(mix: dict[str, float], rng: random.Random, n: int) -> list[str]:
    names = sorted(m for m, w in mix.items() if w > 0)
    return rng.choices(names, weights=[mix[m] for m in names], k=n)


def trace_plans(call: OfflineCall) -> TracePlansOut:
    inp = call.inputs
    assert isinstance(inp, TracePlansInput)
    lex, rng = lexicon(inp.language), call.rng
    slots = persona_slots(inp.persona, inp.relations, lex, rng)
    ev = inp.event.evidence
    media = _media(inp.media_mix, rng, inp.count)
    rich = [m for m in sorted(inp.media_mix) if m not in FACT_ONLY and inp.media_mix[m] > 0] or ["diary"]
    if media[0] in FACT_ONLY:  # the first trace carries everything, so it needs room for feelings
        media[0] = pick(rng, rich)
    plans = []
    for i, medium in enumerate(media):
        if i == 0:
            carried = list(range(len(ev)))
        elif medium in FACT_ONLY:
            carried = [j for j, e in enumerate(ev) if e.kind == "fact"][:1]
        else:
            carried = sorted(rng.sample(range(len(ev)), k=min(len(ev), rng.randint(1, 2))))
        audience = _audience(medium, inp.event.people, slots, lex, rng)
        intent_key = {"search_history": "plan_intent_ask", "calendar_event": "plan_intent_schedule",
                      "memo": "plan_intent_note", "diary": "plan_intent_evidence"}.get(medium, "plan_intent_share")
        when = dt.datetime.combine(inp.event.date, dt.time(8, 0)) + dt.timedelta(minutes=rng.randint(0, 60 * 60))
        plans.append(TracePlan(
            medium=medium, timestamp=when, audience=audience,
            intent=fill(lex.s(intent_key), {"audience": audience, "topic": inp.event.title.lower()}),
            key_information=[first_person(ev[j].statement, inp.persona, lex) for j in carried],
            evidence_indices=carried,
        ))
    return TracePlansOut(traces=plans)


def _audience(medium: str, people: list[str], slots: dict[str, str], lex, rng: random.Random) -> str:
    if medium in ("chat_private", "email"):
        return fill(lex.s("audience_person"), {"person": pick(rng, people) if people else slots["friend"]})
    if medium == "chat_group":
        return fill(lex.s("audience_group"), {"group": slots["group"]})
    if medium == "social_media":
        return lex.s("audience_followers")
    return fill(lex.s("audience_self"), {"subj_self": lex.first_person.reflexive})


def noise_plans(call: OfflineCall) -> TracePlansOut:
    inp = call.inputs
    assert isinstance(inp, NoisePlansInput)
    lex, rng = lexicon(inp.language), call.rng
    slots = persona_slots(inp.persona, inp.relations, lex, rng)
    plans = []
    for medium, date in zip(_media(inp.media_mix, rng, inp.count), _dates(inp.phase.start_date, inp.phase.end_date, inp.count, rng)):
        when = dt.datetime.combine(date, dt.time(7, 0)) + dt.timedelta(minutes=rng.randint(0, 15 * 60))
        plans.append(TracePlan(medium=medium, timestamp=when, evidence_indices=[], key_information=[],
                               audience=_audience(medium, [slots["person"]], slots, lex, rng),
                               intent=fill(lex.s("plan_intent_note"), {"topic": medium.replace("_", " ")})))
    return TracePlansOut(traces=plans)


# -- step 2: the content ------------------------------------------------------------------------


def write_trace(call: OfflineCall) -> TraceContent:
    inp = call.inputs
    assert isinstance(inp, TraceWriteInput)
    lex, rng = lexicon(inp.language), call.rng
    slots = persona_slots(inp.persona, inp.relations, lex, rng)
    slots.update(_time_slots(inp.plan.timestamp, lex))
    people = [p for p in inp.people if p != inp.persona.name] or [slots["friend"]]
    slots["person"] = pick(rng, people)
    lines = inp.plan.key_information
    medium = inp.plan.medium
    writer = _WRITERS.get(medium, _write_diary)
    if not lines:  # a noise trace: everyday life that carries no evidence
        templates = lex.noise.get(medium) or lex.noise["diary"]
        others = [p for p in People.of(inp.relations).everyone if p != slots["person"]] or [slots["person"]]
        return TraceContent(content=fill(pick(rng, templates), {**slots, "person2": pick(rng, others)}))
    return TraceContent(content=writer(inp, lines, slots, lex, rng))


def _time_slots(ts: dt.datetime, lex) -> dict[str, str]:
    if lex.language == "zh":
        weekday = "周" + "一二三四五六日"[ts.weekday()]
        return {"weekday": weekday, "date_words": f"{ts.month}月{ts.day}日"}
    return {"weekday": ts.strftime("%A"), "date_words": ts.strftime("%d %B").lstrip("0")}


def _m(lex, medium: str, key: str):
    return lex.media[medium][key]


def _emotion(inp: TraceWriteInput) -> str:
    return inp.mood.dominant_emotion


def _write_diary(inp, lines, slots, lex, rng) -> str:
    opener = fill(pick(rng, _m(lex, "diary", "openers")), slots)
    sep = "" if lex.language == "zh" else " "
    body = [lines[0]] + [f"{pick(rng, _m(lex, 'diary', 'joiners'))}{sep}{line}" for line in lines[1:]]
    closer = fill(pick(rng, _m(lex, "diary", "closers")), {"emotion": _emotion(inp)})
    return sep.join([opener, *body, closer])


def _write_social(inp, lines, slots, lex, rng) -> str:
    tags = " ".join(sorted({fill(t, {"hobby_tag": slots["hobby"].replace(" ", ""), "city_tag": slots["city"].replace(" ", "")})
                            for t in rng.sample(_m(lex, "social_media", "hashtags"), 2)}))
    sep = "" if lex.language == "zh" else " "
    return fill(pick(rng, _m(lex, "social_media", "templates")), {"line": sep.join(lines), "hashtags": tags})


def _write_chat_private(inp, lines, slots, lex, rng) -> str:
    me = _m(lex, "chat_private", "self")
    out = []
    for i, line in enumerate(lines):
        out.append(f"{me}: {line}")
        if i == 0:
            out.append(fill(pick(rng, _m(lex, "chat_private", "reply_templates")), slots))
    out.append(pick(rng, _m(lex, "chat_private", "closers")))
    return "\n".join(out)


def _write_chat_group(inp, lines, slots, lex, rng) -> str:
    me = _m(lex, "chat_private", "self")
    out = [fill(_m(lex, "chat_group", "header"), slots)]
    out += [f"{me}: {line}" for line in lines]
    out.append(fill(pick(rng, _m(lex, "chat_group", "reply_templates")), slots))
    return "\n".join(out)


def _write_email(inp, lines, slots, lex, rng) -> str:
    person = inp.plan.audience if inp.plan.audience in People.of(inp.relations).everyone else slots["person"]
    subject = fill(_m(lex, "email", "subject"), {"subject": pick(rng, _m(lex, "email", "subjects"))})
    greeting = fill(_m(lex, "email", "greeting"), {"person": person})
    sep = "" if lex.language == "zh" else " "
    return "\n".join([subject, greeting, sep.join(lines), fill(_m(lex, "email", "closing"), slots)])


def _write_memo(inp, lines, slots, lex, rng) -> str:
    bullet = _m(lex, "memo", "bullet")
    return "\n".join([fill(_m(lex, "memo", "header"), slots), *(bullet + l for l in lines)])


def _write_search(inp, lines, slots, lex, rng) -> str:
    queries = []
    for line in lines:
        words = [w for w in textutil.content_words(line) if w not in ("i", "me", "my", "我")]
        if lex.language == "zh":
            query = line.removeprefix("我").replace("了", "").rstrip("。")[:24]
        else:
            query = " ".join(dict.fromkeys(words))  # keep order, drop repeats
        queries.append(pick(rng, _m(lex, "search_history", "prefixes")) + query)
    queries.append(pick(rng, lex.hobby(slots["hobby"]).searches))
    return "\n".join(queries)


def _write_calendar(inp, lines, slots, lex, rng) -> str:
    title = lines[0].rstrip(".。")
    if lex.language == "zh":
        title = title.removeprefix(lex.first_person.subject)
    return fill(_m(lex, "calendar_event", "template"), {
        "title": title, "place": inp.place, "duration": pick(rng, _m(lex, "calendar_event", "durations"))})


_WRITERS = {
    "diary": _write_diary, "social_media": _write_social, "chat_private": _write_chat_private,
    "chat_group": _write_chat_group, "email": _write_email, "memo": _write_memo,
    "search_history": _write_search, "calendar_event": _write_calendar,
}
