"""Stage III offline handlers: detailed events with co-generated evidence, two-step traces, noise."""

from __future__ import annotations

import datetime as dt
import random
import re
from dataclasses import dataclass

from clonemem import privacy
from clonemem import text as textutil
from clonemem.offline import OfflineCall
from clonemem.offline.world.common import (
    People,
    arc_state,
    cap,
    fill,
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
        focus = primary if rng.random() < 0.6 else pick(rng, inp.arcs)
        arche, state = arc_state(
            focus, lex, phase_state_index(focus, inp.phase_index, inp.phase_count)
        )
        if rng.random() < 0.5 and state.facts:
            fact = fill(pick(rng, state.facts), slots)
            activity = fact.removeprefix(slots["first"]).strip()
        else:
            activity = fill(
                pick(rng, lex.domain_activities.get(arche.domain, lex.domain_activities["hobby"])),
                slots,
            )
            fact = fill(lex.s("evidence_fact_activity"), {**slots, "activity": activity})
        evidence = [EvidenceDraft(kind="fact", statement=_sentence(fact), arc_keys=[focus.key])]
        emo_arc = pick(rng, by_dim.get("emotion", [focus]))
        _, emo_state = arc_state(
            emo_arc, lex, phase_state_index(emo_arc, inp.phase_index, inp.phase_count)
        )
        feeling = pick(rng, emo_state.feelings + state.feelings)
        evidence.append(
            EvidenceDraft(
                kind="emotion",
                arc_keys=sorted({emo_arc.key, focus.key}),
                statement=_sentence(
                    fill(
                        lex.s("evidence_emotion"),
                        {
                            **slots,
                            "feeling": feeling,
                            "context": slots["subj"]
                            + ("" if lex.language == "zh" else " ")
                            + activity,
                        },
                    )
                ),
            )
        )
        op_arc = pick(rng, by_dim.get("opinion", [focus]))
        _, op_state = arc_state(
            op_arc, lex, phase_state_index(op_arc, inp.phase_index, inp.phase_count)
        )
        template = (
            lex.s("evidence_opinion") if rng.random() < 0.6 else lex.s("evidence_opinion_alt")
        )
        evidence.append(
            EvidenceDraft(
                kind="opinion",
                arc_keys=[op_arc.key],
                statement=_sentence(
                    fill(template, {**slots, "belief": pick(rng, op_state.beliefs)})
                ),
            )
        )
        for extra in state.facts[: max(0, inp.evidence_per_event - 3)]:
            evidence.append(
                EvidenceDraft(
                    kind="fact", arc_keys=[focus.key], statement=_sentence(fill(extra, slots))
                )
            )
        people = sorted({p for p in People.of(inp.relations).everyone if p in fact + activity})
        events.append(
            DetailedEvent(
                date=date,
                title=cap(_clip(activity)),
                people=people,
                place=slots["place"],
                description=fill(
                    lex.s("detailed_event_description"),
                    {**slots, "date": date.isoformat(), "activity": activity},
                ),
                evidence=evidence[: max(inp.evidence_per_event, 1)],
            )
        )
    return DetailedEventsOut(events=events)


def _sentence(text: str) -> str:
    text = text.strip()
    return (
        text
        if text.endswith((".", "!", "?", "。", "！", "？"))
        else text + ("。" if _is_cjk(text) else ".")
    )


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
    rich = [m for m in sorted(inp.media_mix) if m not in FACT_ONLY and inp.media_mix[m] > 0] or [
        "diary"
    ]
    if media[0] in FACT_ONLY:  # the first trace carries everything, so it needs room for feelings
        media[0] = pick(rng, rich)
    every = [m for e in ev for m in privacy.matters_of(e.kind, e.arc_keys, inp.boundaries)]
    if every and not _fits(media[0], privacy.allowed_audience(every)):
        # the trace that carries everything goes out on a medium within the boundary: swapped with a later
        # one when possible, so the event's media (and the run's media mix) stay as drawn
        swap = next(
            (
                j
                for j, m in enumerate(media)
                if m not in FACT_ONLY and _fits(m, privacy.allowed_audience(every))
            ),
            None,
        )
        if swap is not None:
            media[0], media[swap] = media[swap], media[0]
    plans = []
    for i, medium in enumerate(media):
        if i == 0:
            carried = list(range(len(ev)))
        elif medium in FACT_ONLY:
            carried = [j for j, e in enumerate(ev) if e.kind == "fact"][:1]
        else:
            carried = sorted(rng.sample(range(len(ev)), k=min(len(ev), rng.randint(1, 2))))
        sensitive = [
            m
            for j in carried
            for m in privacy.matters_of(ev[j].kind, ev[j].arc_keys, inp.boundaries)
        ]
        if sensitive and i > 0 and not _fits(medium, privacy.allowed_audience(sensitive)):
            # a later trace that would overshare carries what may be shared instead (the first one carries all)
            shareable = [
                j
                for j, e in enumerate(ev)
                if not privacy.matters_of(e.kind, e.arc_keys, inp.boundaries)
            ]
            safe = [j for j in carried if j in shareable] or shareable[:1]
            if safe:
                carried, sensitive = safe, []
        if sensitive:  # a sensitive matter goes only to someone who may know it, or stays private
            medium, audience = _within_boundary(
                medium, privacy.allowed_audience(sensitive), inp.media_mix, lex, rng
            )
        else:
            audience = _audience(medium, inp.event.people, slots, lex, rng)
        intent_key = {
            "search_history": "plan_intent_ask",
            "calendar_event": "plan_intent_schedule",
            "memo": "plan_intent_note",
            "diary": "plan_intent_evidence",
        }.get(medium, "plan_intent_share")
        when = dt.datetime.combine(inp.event.date, dt.time(8, 0)) + dt.timedelta(
            minutes=rng.randint(0, 60 * 60)
        )
        plans.append(
            TracePlan(
                medium=medium,
                timestamp=when,
                audience=audience,
                intent=fill(
                    lex.s(intent_key), {"audience": audience, "topic": inp.event.title.lower()}
                ),
                key_information=[first_person(ev[j].statement, inp.persona, lex) for j in carried],
                evidence_indices=carried,
            )
        )
    return TracePlansOut(traces=plans)


def _audience(
    medium: str, people: list[str], slots: dict[str, str], lex, rng: random.Random
) -> str:
    if medium in ("chat_private", "email"):
        return fill(
            lex.s("audience_person"), {"person": pick(rng, people) if people else slots["friend"]}
        )
    if medium == "chat_group":
        return fill(lex.s("audience_group"), {"group": slots["group"]})
    if medium == "social_media":
        return lex.s("audience_followers")
    return fill(lex.s("audience_self"), {"subj_self": lex.first_person.reflexive})


def _fits(medium: str, allowed: list[str]) -> bool:
    """Can a trace on this medium carry a matter only ``allowed`` may know? Never a post or a group chat;
    a message only when someone may know it."""
    return medium not in privacy.WIDE_MEDIA and (
        medium not in privacy.PERSON_MEDIA or bool(allowed)
    )


def _within_boundary(
    medium: str, allowed: list[str], mix: dict[str, float], lex, rng: random.Random
) -> tuple[str, str]:
    """The medium and audience of a trace that carries a sensitive matter: a message to one of the people who
    may know it, or a private note (a public post or group chat, the one case left, becomes one of those)."""
    personal = [m for m in privacy.PERSON_MEDIA if mix.get(m, 0) > 0]
    if allowed and (medium in privacy.PERSON_MEDIA or (medium in privacy.WIDE_MEDIA and personal)):
        if medium not in privacy.PERSON_MEDIA:
            medium = pick(rng, personal)
        return medium, fill(lex.s("audience_person"), {"person": pick(rng, allowed)})
    if medium in privacy.PERSON_MEDIA or medium in privacy.WIDE_MEDIA:
        medium = pick(rng, [m for m in privacy.SELF_MEDIA if mix.get(m, 0) > 0] or ["diary"])
    return medium, fill(lex.s("audience_self"), {"subj_self": lex.first_person.reflexive})


def noise_plans(call: OfflineCall) -> TracePlansOut:
    inp = call.inputs
    assert isinstance(inp, NoisePlansInput)
    lex, rng = lexicon(inp.language), call.rng
    slots = persona_slots(inp.persona, inp.relations, lex, rng)
    plans = []
    for medium, date in zip(
        _media(inp.media_mix, rng, inp.count),
        _dates(inp.phase.start_date, inp.phase.end_date, inp.count, rng),
    ):
        when = dt.datetime.combine(date, dt.time(7, 0)) + dt.timedelta(
            minutes=rng.randint(0, 15 * 60)
        )
        plans.append(
            TracePlan(
                medium=medium,
                timestamp=when,
                evidence_indices=[],
                key_information=[],
                audience=_audience(medium, [slots["person"]], slots, lex, rng),
                intent=fill(lex.s("plan_intent_note"), {"topic": medium.replace("_", " ")}),
            )
        )
    return TracePlansOut(traces=plans)


# -- step 2: the content ------------------------------------------------------------------------
#
# A trace is written from the plan's key information: one first-person sentence per carried
# evidence. Pasting those sentences one after another reads as a template and repeats itself (the
# feeling "I felt trapped when I finished X" restates the fact "I finished X" word for word), so the
# writer recognises the world's own evidence forms, folds a feeling into the fact it is about, and
# gives every medium its own shape. Every word of every carried statement stays in the trace (the
# fact once, the feeling with it), which is what the containment checks and the answerers rely on.


@dataclass(frozen=True)
class _Said:
    """One carried evidence line and, when it has one of the world's evidence forms, its parts."""

    kind: str
    text: str
    parts: dict[str, str] | None = None


def write_trace(call: OfflineCall) -> TraceContent:
    inp = call.inputs
    assert isinstance(inp, TraceWriteInput)
    lex, rng = lexicon(inp.language), call.rng
    slots = persona_slots(inp.persona, inp.relations, lex, rng)
    slots.update(_time_slots(inp.plan.timestamp, lex))
    people = [p for p in inp.people if p != inp.persona.name] or [slots["friend"]]
    slots["person"] = pick(rng, people)
    others = [
        p for p in People.of(inp.relations).everyone if p not in (slots["person"], inp.persona.name)
    ]
    slots["person2"] = pick(rng, others) if others else slots["person"]
    medium = inp.plan.medium
    if not inp.plan.key_information:  # a noise trace: everyday life that carries no evidence
        return TraceContent(content=_noise(medium, inp.plan.timestamp, slots, lex, rng))
    said = _said(inp, lex)
    writer = _WRITERS.get(medium, _write_diary)
    return TraceContent(content=writer(inp, said, slots, lex, rng))


def _time_slots(ts: dt.datetime, lex) -> dict[str, str]:
    if lex.language == "zh":
        weekday = "周" + "一二三四五六日"[ts.weekday()]
        return {"weekday": weekday, "date_words": f"{ts.month}月{ts.day}日", "day_short": weekday}
    return {
        "weekday": ts.strftime("%A"),
        "date_words": ts.strftime("%d %B").lstrip("0"),
        "day_short": ts.strftime("%a %d %b").replace(" 0", " "),
    }


def _m(lex, medium: str, key: str):
    return lex.media[medium][key]


def _forms(lex, key: str) -> list[str]:
    forms = lex.sentences["trace_forms"]
    assert isinstance(forms, dict), "trace_forms"
    return forms[key]


def _sep(lex) -> str:
    return "" if lex.language == "zh" else " "


def _bare(sentence: str) -> str:
    return sentence.strip().rstrip(".。!！")


def _pattern(template: str, lex) -> re.Pattern[str]:
    """The first-person form of an evidence template as a regex with one group per slot."""
    pieces = re.split(r"(\{\w+\})", _bare(template))
    out = []
    for piece in pieces:
        slot = re.fullmatch(r"\{(\w+)\}", piece)
        if slot is None:
            out.append(re.escape(piece))
        elif slot.group(1) == "first":
            out.append(re.escape(lex.first_person.subject))
        else:
            out.append(f"(?P<{slot.group(1)}>.+?)")
    return re.compile("^" + "".join(out) + r"[.。]?$")


def _said(inp: TraceWriteInput, lex) -> list[_Said]:
    lines = inp.plan.key_information
    kinds = (
        [e.kind for e in inp.evidence] if len(inp.evidence) == len(lines) else ["fact"] * len(lines)
    )
    forms = {
        "emotion": ["evidence_emotion"],
        "opinion": ["evidence_opinion", "evidence_opinion_alt"],
    }
    out = []
    for kind, line in zip(kinds, lines):
        parts = None
        for key in forms.get(kind, []):
            m = _pattern(lex.s(key), lex).match(line.strip())
            if m:
                parts = {**m.groupdict(), "form": key}
                break
        out.append(_Said(kind, line.strip(), parts))
    return out


def _sentences(said: list[_Said], slots: dict[str, str], lex, rng: random.Random) -> list[str]:
    """The carried statements as the persona would put them: a feeling folded into the fact it is
    about (so the fact is said once), opinions and feelings in varied but word-preserving frames."""
    facts = {_bare(s.text).lower(): i for i, s in enumerate(said) if s.kind == "fact"}
    out: dict[int, str] = {i: s.text for i, s in enumerate(said)}
    for i, s in enumerate(said):
        if not s.parts:
            continue
        if s.kind == "emotion":
            context, feeling = s.parts["context"], s.parts["feeling"]
            j = facts.get(_bare(context).lower())
            if j is not None:
                fact = _bare(said[j].text)
                out[j] = fill(
                    pick(rng, _forms(lex, "fact_feeling")),
                    {**slots, "fact": fact, "feeling": feeling, "pred": _predicate(fact, lex)},
                )
                del out[i]
            else:
                out[i] = fill(
                    pick(rng, _forms(lex, "feeling")),
                    {
                        **slots,
                        "context": context,
                        "feeling": feeling,
                        "pred": _predicate(context, lex),
                    },
                )
        elif s.parts["form"] == "evidence_opinion":
            out[i] = fill(pick(rng, _forms(lex, "belief")), {**slots, "belief": s.parts["belief"]})
        else:
            out[i] = fill(
                pick(rng, _forms(lex, "told")),
                {**slots, "belief": s.parts["belief"], "person": s.parts["person"]},
            )
    return [_sentence(out[i]) for i in sorted(out)]


def _predicate(clause: str, lex) -> str:
    """A first-person clause without its subject ("I finished X" -> "finished X")."""
    subject = lex.first_person.subject
    return clause[len(subject) :].lstrip() if clause.startswith(subject) else clause


def _after_joiner(sentence: str, lex) -> str:
    """A sentence continued after a joiner ("Also,"): lower-case its first word unless it is "I"."""
    if lex.language == "zh" or re.match(r"I\b", sentence):
        return sentence
    return sentence[:1].lower() + sentence[1:]


def _join(
    joiners: list[str], sentences: list[str], lex, rng: random.Random, chance: float = 0.5
) -> str:
    """Sentences as running prose, some continued with a joiner, no joiner used twice in a row."""
    sep, out, last = _sep(lex), [sentences[0]], None
    for s in sentences[1:]:
        if rng.random() < chance:
            joiner = pick(rng, [j for j in joiners if j != last] or joiners)
            last = joiner
            out.append(f"{joiner}{sep}{_after_joiner(s, lex)}")
        else:
            out.append(s)
    return sep.join(out)


def _emotion(inp: TraceWriteInput) -> str:
    return inp.mood.dominant_emotion


def _clock(ts: dt.datetime) -> str:
    return f"{ts.hour:02d}:{ts.minute:02d}"


def _write_diary(inp, said, slots, lex, rng) -> str:
    opener = fill(pick(rng, _m(lex, "diary", "openers")), slots)
    body = _join(_m(lex, "diary", "joiners"), _sentences(said, slots, lex, rng), lex, rng)
    closer = fill(pick(rng, _m(lex, "diary", "closers")), {**slots, "emotion": _emotion(inp)})
    return _sep(lex).join([opener, body, closer])


def _hashtags(slots, lex, rng: random.Random) -> str:
    pool = _m(lex, "social_media", "hashtags")
    tags = [fill(t, slots) for t in rng.sample(pool, rng.randint(1, 3))]
    return " ".join(dict.fromkeys(tags))


def _write_social(inp, said, slots, lex, rng) -> str:
    line = _join(
        _m(lex, "social_media", "joiners"), _sentences(said, slots, lex, rng), lex, rng, 0.4
    )
    return fill(
        pick(rng, _m(lex, "social_media", "templates")),
        {**slots, "line": line, "hashtags": _hashtags(slots, lex, rng)},
    )


def _write_chat_private(inp, said, slots, lex, rng) -> str:
    me = _m(lex, "chat_private", "self")
    out = []
    if rng.random() < 0.6:
        out += [fill(t, slots) for t in pick(rng, _m(lex, "chat_private", "openers")).split("\n")]
    replies = list(_m(lex, "chat_private", "reply_templates"))
    rng.shuffle(replies)
    for i, line in enumerate(_sentences(said, slots, lex, rng)):
        out.append(f"{me}: {line}")
        if i < len(replies):
            out.append(fill(replies[i], slots))
    out.append(fill(pick(rng, _m(lex, "chat_private", "closers")), slots))
    return "\n".join(out)


def _write_chat_group(inp, said, slots, lex, rng) -> str:
    me = _m(lex, "chat_private", "self")
    out = [fill(_m(lex, "chat_group", "header"), slots)]
    if rng.random() < 0.6:
        out.append(fill(pick(rng, _m(lex, "chat_group", "openers")), slots))
    out += [f"{me}: {line}" for line in _sentences(said, slots, lex, rng)]
    replies = rng.sample(_m(lex, "chat_group", "reply_templates"), 2)
    out.append(fill(replies[0], slots))
    if slots["person2"] != slots["person"] and rng.random() < 0.6:
        out.append(fill(replies[1], {**slots, "person": slots["person2"]}))
    return "\n".join(out)


def _write_email(inp, said, slots, lex, rng) -> str:
    person = (
        inp.plan.audience
        if inp.plan.audience in People.of(inp.relations).everyone
        else slots["person"]
    )
    slots = {**slots, "person": person}
    subject = fill(
        _m(lex, "email", "subject"),
        {"subject": fill(pick(rng, _m(lex, "email", "subjects")), slots)},
    )
    body = _join(_m(lex, "diary", "joiners"), _sentences(said, slots, lex, rng), lex, rng, 0.3)
    parts = [subject, fill(pick(rng, _m(lex, "email", "greetings")), slots)]
    if rng.random() < 0.7:
        body = fill(pick(rng, _m(lex, "email", "openings")), slots) + _sep(lex) + body
    parts.append(body)
    if rng.random() < 0.6:
        parts.append(fill(pick(rng, _m(lex, "email", "asides")), slots))
    parts.append(fill(pick(rng, _m(lex, "email", "closings")), slots))
    return "\n".join(parts)


def _write_memo(inp, said, slots, lex, rng) -> str:
    bullet = _m(lex, "memo", "bullet")
    out = [fill(pick(rng, _m(lex, "memo", "headers")), slots)]
    out += [bullet + line for line in _sentences(said, slots, lex, rng)]
    if rng.random() < 0.5:  # a memo often ends with something still to do
        out.append(
            f"{_m(lex, 'memo', 'todo_box')} {fill(pick(rng, lex.noise['todo_items']), slots)}"
        )
    return "\n".join(out)


def _query(line: str, lex) -> str:
    if lex.language == "zh":
        return line.removeprefix(lex.first_person.subject).replace("了", "").rstrip("。")[:24]
    words = [w for w in textutil.content_words(line) if w not in ("i", "me", "my")]
    return " ".join(dict.fromkeys(words))  # keep order, drop repeats


def _search_lines(queries: list[str], start: dt.datetime, lex, rng: random.Random) -> str:
    """Queries with the time each was typed, minutes apart."""
    out, when = [], start
    for q in queries:
        out.append(fill(_m(lex, "search_history", "line"), {"time": _clock(when), "query": q}))
        when += dt.timedelta(minutes=rng.randint(1, 25))
    return "\n".join(out)


def _write_search(inp, said, slots, lex, rng) -> str:
    queries = []
    for s in said:
        query = _query(s.text, lex)
        queries.append(
            fill(pick(rng, _m(lex, "search_history", "prefixes")), slots)
            + query
            + fill(pick(rng, _m(lex, "search_history", "suffixes")), slots)
        )
    related = lex.hobby(slots["hobby"]).searches + [
        fill(q, slots) for q in lex.noise["search_queries"]
    ]
    queries += rng.sample(related, rng.randint(1, 2))
    return _search_lines(queries, inp.plan.timestamp, lex, rng)


def _calendar(
    title: str, place: str, ts: dt.datetime, slots, lex, rng: random.Random, extra: bool = True
) -> str:
    start = ts.replace(hour=rng.randint(7, 20), minute=rng.choice([0, 15, 30, 45]))
    end = start + dt.timedelta(minutes=rng.choice([30, 45, 60, 90, 120, 180]))
    lines = [
        fill(
            pick(rng, _m(lex, "calendar_event", "templates")),
            {**slots, "title": title, "place": place, "start": _clock(start), "end": _clock(end)},
        )
    ]
    if extra and rng.random() < 0.5:
        lines.append(fill(pick(rng, _m(lex, "calendar_event", "extras")), slots))
    return "\n".join(lines)


def _write_calendar(inp, said, slots, lex, rng) -> str:
    title = _bare(said[0].text)
    title = (
        cap(_predicate(title, lex))
        if lex.language == "en"
        else title.removeprefix(lex.first_person.subject)
    )
    return _calendar(title, inp.place or slots["place"], inp.plan.timestamp, slots, lex, rng)


def _noise(medium: str, ts: dt.datetime, slots: dict[str, str], lex, rng: random.Random) -> str:
    """Everyday life in the medium's own form; searches, to-do lists and appointments are composed
    from pools so that no two days look the same."""
    if medium == "search_history":
        queries = [
            fill(q, slots) for q in rng.sample(lex.noise["search_queries"], rng.randint(2, 4))
        ]
        return _search_lines(queries, ts, lex, rng)
    if medium == "memo" and rng.random() < 0.6:
        items = rng.sample(lex.noise["todo_items"], rng.randint(3, 5))
        box = _m(lex, "memo", "todo_box")
        head = fill(pick(rng, lex.noise["todo_headers"]), slots)
        return "\n".join([head, *(f"{box} {fill(i, slots)}" for i in items)])
    if medium == "calendar_event":
        title, place = fill(pick(rng, lex.noise["appointments"]), slots).split("|")
        return _calendar(title, place, ts, slots, lex, rng, extra=rng.random() < 0.5)
    templates = lex.noise.get(medium) or lex.noise["diary"]
    text = fill(pick(rng, templates), slots)
    return (
        fill(_m(lex, "chat_group", "header"), slots) + "\n" + text
        if medium == "chat_group"
        else text
    )


_WRITERS = {
    "diary": _write_diary,
    "social_media": _write_social,
    "chat_private": _write_chat_private,
    "chat_group": _write_chat_group,
    "email": _write_email,
    "memo": _write_memo,
    "search_history": _write_search,
    "calendar_event": _write_calendar,
}
