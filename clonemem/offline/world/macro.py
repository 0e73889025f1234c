"""Stage I offline handlers: persona enrichment, relations, event seeds, life arcs, major events."""

from __future__ import annotations

import datetime as dt

from clonemem.offline import OfflineCall
from clonemem.offline.world.common import (
    cap,
    fill,
    first_name,
    join_list,
    lexicon,
    persona_slots,
    pick,
    with_article,
)
from clonemem.schemas.generation import (
    AnchorState,
    ArcAlignment,
    ArcsInput,
    ArcsOut,
    ChosenSeed,
    LifeArc,
    MajorEvent,
    MajorEventsInput,
    MajorEventsOut,
    PersonaBrief,
    PersonaSpec,
    Profile,
    Relation,
    RelationsInput,
    RelationsOut,
    SeedsInput,
    SeedsOut,
)

HIGH, LOW = 0.62, 0.38


def brief_of(profile: Profile) -> PersonaBrief:
    return PersonaBrief(
        name=profile.name,
        age=profile.age,
        gender=profile.gender,
        occupation=profile.occupation,
        employer=profile.employer,
        city=profile.city,
        interests=profile.interests,
        personality=profile.personality,
    )


def _full_name(given: str, family: str, lex) -> str:
    parts = [given, family] if lex.name_order == "given_family" else [family, given]
    return lex.name_joiner.join(parts)


def enrich_persona(call: OfflineCall) -> Profile:
    spec = call.inputs
    assert isinstance(spec, PersonaSpec)
    lex, rng = lexicon(spec.language), call.rng
    # the schema allows "nonbinary"; the offline lexicon's grammar covers she/he only
    gender = rng.choice(["female", "male"])
    given = pick(rng, lex.names.female if gender == "female" else lex.names.male)
    surname = pick(rng, lex.names.surnames)
    occ = pick(rng, lex.occupations)
    city, hometown = rng.sample(lex.cities, 2)
    hobbies = rng.sample(lex.hobbies, 2)
    b5 = spec.big_five.model_dump()
    # personality: the traits furthest from the middle, in the lexicon's words
    ranked = sorted(b5, key=lambda t: abs(b5[t] - 0.5), reverse=True)[:3]
    traits = [lex.traits[t].high if b5[t] >= 0.5 else lex.traits[t].low for t in ranked]
    concerns: list[str] = []
    for trait in ("neuroticism", "conscientiousness", "agreeableness"):
        if b5[trait] >= HIGH:
            concerns.append(pick(rng, lex.concerns[trait]))
    concerns += rng.sample(lex.concerns["general"], 2 if len(concerns) < 2 else 1)
    roles = lex.relation_roles[
        "family"
    ]  # [mother, father, sister, brother]: the profile names mother and sister
    family_names = rng.sample([n for n in lex.names.female if n != given], 2)
    # in Chinese families the mother keeps her own surname
    mother_surname = (
        pick(rng, [s for s in lex.names.surnames if s != surname])
        if lex.language == "zh"
        else surname
    )
    family = [
        fill(
            lex.s("family_item"),
            {
                "role": roles[i * 2 % len(roles)],
                "name": _full_name(family_names[i], mother_surname if i == 0 else surname, lex),
            },
        )
        for i in range(2)
    ]
    name = _full_name(given, surname, lex)
    first = given if not lex.first_is_full_name else name
    pron = lex.pronouns[gender]
    slots = {
        "first": first,
        "traits": join_list(traits, lex),
        "hometown": hometown.name,
        "city": city.name,
        "education": occ.education,
        "subj": pron.subj,
        "occupation": occ.title,
        "occupation_a": with_article(occ.title, lex),
        "employer": occ.employers[0],
        "interest": hobbies[0].name,
        "family_member": family[0].replace(" ", "") if lex.language == "zh" else family[0],
        "year": str(spec.timeline_start.year),
    }
    return Profile(
        name=name,
        age=rng.randint(24, 52),
        gender=gender,
        personality=fill(lex.s("personality"), slots),
        family=family,
        education=occ.education,
        occupation=occ.title,
        employer=occ.employers[0],
        city=city.name,
        concerns=concerns,
        interests=[h.name for h in hobbies],
        narrative=fill(lex.s("narrative"), slots),
    )


def relations(call: OfflineCall) -> RelationsOut:
    inp = call.inputs
    assert isinstance(inp, RelationsInput)
    lex, rng, profile = lexicon(inp.language), call.rng, inp.profile
    bonds = lex.sentences["bonds"]
    assert isinstance(bonds, dict)
    first = first_name(brief_of(profile), lex)
    taken = {profile.name, first}
    out: list[Relation] = []

    def add(kind: str, role: str, name: str) -> None:
        taken.add(name)
        desc = fill(
            lex.s("relation_description"),
            {"name": name, "first": first, "role": role, "bond": pick(rng, bonds[kind])},
        )
        out.append(Relation(name=name, relation_type=kind, role=role, description=desc))

    for item in profile.family:  # the family named in the profile, as "role name"
        role, _, name = item.partition(" ")
        add("family", role, name.strip() or item)
    # no friend or colleague shares a given name with the persona or the family
    pool = [n for n in lex.names.female + lex.names.male if not any(n in full for full in taken)]
    rng.shuffle(pool)
    if profile.age >= 26 and rng.random() < 0.7:
        add("partner", lex.relation_roles["partner"][0], pool.pop())
    for role in lex.relation_roles["friend"]:
        add("friend", role, pool.pop())
    for role in lex.relation_roles["colleague"]:
        add("colleague", role, pool.pop())
    return RelationsOut(relations=out)


# Persona compatibility of pool concepts: what the offline model "knows" about each.
def _compatible(concept: str, profile: Profile, has_partner: bool) -> bool:
    age = profile.age
    rules = {
        "graduation": age <= 27,
        "retirement": age >= 58,
        "marriage": has_partner,
        "moving_in_together": has_partner,
        "breakup": has_partner,
        "layoff": age < 60,
    }
    return rules.get(concept, True)


def select_seeds(call: OfflineCall) -> SeedsOut:
    inp = call.inputs
    assert isinstance(inp, SeedsInput)
    lex, rng, profile = lexicon(inp.language), call.rng, inp.profile
    themed = {s for a in lex.archetypes for s in a.seeds}
    candidates = [c for c in inp.pool if _compatible(c.concept, profile, has_partner=True)]
    # prefer concepts the world can develop into arcs, then a seeded shuffle for variety
    rng.shuffle(candidates)
    candidates.sort(key=lambda c: c.concept not in themed)
    first = first_name(brief_of(profile), lex)
    seeds = [
        ChosenSeed(
            concept=c.concept,
            label=c.label,
            origin="pool",
            rationale=fill(
                lex.s("seed_rationale_pool"),
                {
                    "label": cap(c.label),
                    "first": first,
                    "occupation": profile.occupation,
                    "city": profile.city,
                },
            ),
        )
        for c in candidates[: inp.max_from_pool]
    ]
    added = [("new_hobby", profile.interests[0])]
    if any("parent" in c or "父" in c or "母" in c for c in profile.concerns):
        added.append(("parent_illness", profile.concerns[0]))
    for concept, _ in added[: inp.max_added]:
        if any(s.concept == concept for s in seeds):
            continue
        label = next((c.label for c in inp.pool if c.concept == concept), concept.replace("_", " "))
        seeds.append(
            ChosenSeed(
                concept=concept,
                label=label,
                origin="persona",
                rationale=fill(
                    lex.s("seed_rationale_persona"),
                    {
                        "first": first,
                        "interest": profile.interests[0],
                        "concern": profile.concerns[0],
                    },
                ),
            )
        )
    return SeedsOut(seeds=seeds)


def life_arcs(call: OfflineCall) -> ArcsOut:
    inp = call.inputs
    assert isinstance(inp, ArcsInput)
    lex, rng = lexicon(inp.language), call.rng
    brief = brief_of(inp.profile)
    slots = persona_slots(brief, inp.relations, lex, rng)
    seed_rank = {s.concept: i for i, s in enumerate(inp.seeds)}
    arcs: list[LifeArc] = []
    for dimension in ("experience", "emotion", "opinion"):
        pool = [a for a in lex.archetypes if a.dimension == dimension]
        # archetypes reachable from the chosen seeds first, in seed order
        pool.sort(
            key=lambda a: min(
                (seed_rank[s] for s in a.seeds if s in seed_rank), default=len(seed_rank) + 1
            )
        )
        for arche in pool[: inp.arcs_per_dimension]:
            seed = next((s for s in arche.seeds if s in seed_rank), arche.seeds[0])
            states = [
                AnchorState(
                    state=fill(st.state, slots),
                    trigger_logic=cap(fill(st.trigger, slots)),
                    behavioural_cues=cap(fill(st.cues, slots)),
                )
                for st in arche.states
            ]
            dim_word = {
                "experience": "experience",
                "emotion": "emotional life",
                "opinion": "views",
            }[dimension]
            if lex.language == "zh":
                dim_word = {"experience": "经历", "emotion": "情绪", "opinion": "看法"}[dimension]
            arcs.append(
                LifeArc(
                    key=f"A{len(arcs) + 1}",
                    dimension=dimension,
                    theme=arche.key,
                    title=fill(arche.title, slots),
                    description=fill(
                        lex.s("arc_description"),
                        {
                            "first": slots["first"],
                            "dimension": dim_word,
                            "first_state": states[0].state,
                            "last_state": states[-1].state,
                        },
                    ),
                    seed_concept=seed,
                    anchor_states=states,
                )
            )
    return ArcsOut(arcs=arcs)


def anchor_index(event_index: int, event_count: int, state_count: int) -> int:
    """Arcs progress monotonically: the first event sits at the first state, the last at the last."""
    if event_count <= 1 or state_count <= 1:
        return 0
    return event_index * (state_count - 1) // (event_count - 1)


def major_events(call: OfflineCall) -> MajorEventsOut:
    inp = call.inputs
    assert isinstance(inp, MajorEventsInput)
    lex, rng = lexicon(inp.language), call.rng
    span = (inp.timeline_end - inp.timeline_start).days
    first = first_name(brief_of(inp.profile), lex)
    events = []
    for i in range(inp.count):
        date = inp.timeline_start + dt.timedelta(days=int(span * i / inp.count) + rng.randint(0, 6))
        primary = inp.arcs[i % len(inp.arcs)]
        aligns = [
            ArcAlignment(
                arc_key=a.key, anchor_index=anchor_index(i, inp.count, len(a.anchor_states))
            )
            for a in inp.arcs
        ]
        idx = next(al.anchor_index for al in aligns if al.arc_key == primary.key)
        here = primary.anchor_states[idx]
        events.append(
            MajorEvent(
                date=date,
                title=here.trigger_logic,
                primary_arc=primary.key,
                alignments=aligns,
                description=fill(
                    lex.s("major_event_description"),
                    {"first": first, "state": here.state, "trigger": here.trigger_logic},
                ),
            )
        )
    return MajorEventsOut(events=events)
