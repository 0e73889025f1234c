"""A persona's structured data for the gym (AMemGym's blueprint), built by LLM stages from what stage I
made of the persona: its state schema, the states' evolution over the periods (each period tied to
the life event the persona lives through then), the state-dependent questions with one choice per
state combination, and the state-bearing openings of each period's sessions with the validator's
round trip (which states it recovers from each opening).

Every stage output that a model could get wrong in a way validation of its own shape cannot see (a
value not in the schema, a missing period) is checked here against its inputs and refused with one
line naming the persona, the stage and the problem."""

from __future__ import annotations

import datetime as dt
import itertools
import string
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel

from clonemem.errors import UserError
from clonemem.generation import stages as S
from clonemem.gym import stages as GS
from clonemem.ids import content_id
from clonemem.schemas import generation as g
from clonemem.schemas import gym as G
from clonemem.schemas.config import GymConfig, RunConfig

# (stage, input, item) -> output: the caller decides how a step runs (cached, recorded)
Step = Callable[[Any, BaseModel, str], BaseModel]
OPENING_STATES = 2  # states one opening reveals at most (the first period reveals every variable)


class GymDataError(ValueError, UserError):
    """A stage's output does not fit what it was asked for (the message names persona, stage and problem)."""


def ground(
    step: Step,
    spec: g.PersonaSpec,
    pool: list[g.SeedConcept],
    arcs_per_dimension: int,
    major_events: int,
) -> tuple[g.Profile, list[g.LifeArc], list[g.MajorEvent]]:
    """Stage I for one persona (profile, relations, seeds, arcs, major events): the life the gym's
    states evolve through. The same stages and inputs as generation, so their cached steps are shared."""
    lang = spec.language
    profile = step(S.PERSONA, spec, "persona")
    assert isinstance(profile, g.Profile)
    relations = step(S.RELATIONS, g.RelationsInput(profile=profile, language=lang), "relations")
    seeds = step(
        S.SEEDS,
        g.SeedsInput(profile=profile, pool=pool, max_from_pool=4, max_added=2, language=lang),
        "seeds",
    )
    assert isinstance(relations, g.RelationsOut) and isinstance(seeds, g.SeedsOut)
    arcs = step(
        S.ARCS,
        g.ArcsInput(
            profile=profile,
            relations=relations.relations,
            seeds=seeds.seeds,
            arcs_per_dimension=arcs_per_dimension,
            language=lang,
        ),
        "arcs",
    )
    assert isinstance(arcs, g.ArcsOut)
    events = step(
        S.MAJOR_EVENTS,
        g.MajorEventsInput(
            profile=profile,
            relations=relations.relations,
            arcs=arcs.arcs,
            timeline_start=spec.timeline_start,
            timeline_end=spec.timeline_end,
            count=major_events,
            language=lang,
        ),
        "major_events",
    )
    assert isinstance(events, g.MajorEventsOut)
    return profile, list(arcs.arcs), sorted(events.events, key=lambda e: e.date)


def card(profile: g.Profile) -> G.PersonaCard:
    return G.PersonaCard(
        name=profile.name,
        age=profile.age,
        occupation=profile.occupation,
        city=profile.city,
        personality=profile.personality,
        interests=list(profile.interests),
        concerns=list(profile.concerns),
        narrative=profile.narrative,
    )


def periods(
    events: list[g.MajorEvent], start: dt.date, end: dt.date, n_periods: int
) -> list[G.PeriodEvent]:
    """Periods 0..N_p spread evenly over the timeline, each tied to the latest major event by its date."""
    span = (end - start).days
    out = []
    for t in range(n_periods + 1):
        day = start + dt.timedelta(days=round(span * t / max(1, n_periods)))
        event = next((e for e in reversed(events) if e.date <= day), events[0])
        out.append(
            G.PeriodEvent(period=t, date=day, title=event.title, description=event.description)
        )
    return out


def build_blueprint(
    step: Step,
    config: RunConfig,
    spec: g.PersonaSpec,
    pool: list[g.SeedConcept],
    persona_id: str,
    person_key: str,
) -> G.Blueprint:
    """Ground the persona (stage I), then its schema, evolution, questions, openings and exposure check."""
    gym, lang = config.gym, spec.language
    profile, arcs, events = ground(
        step, spec, pool, config.generation.arcs_per_dimension, config.generation.major_events
    )
    persona = card(profile)
    schema = step(
        GS.SCHEMA,
        G.StateSchemaInput(
            persona=persona, arc_themes=[a.theme for a in arcs], count=gym.variables, language=lang
        ),
        "schema",
    )
    assert isinstance(schema, G.StateSchema)
    _check_schema(schema, person_key, gym)
    timeline = periods(events, spec.timeline_start, spec.timeline_end, gym.periods)
    evolution = step(
        GS.EVOLUTION,
        G.EvolutionInput(persona=persona, state_schema=schema, periods=timeline, language=lang),
        "evolution",
    )
    assert isinstance(evolution, G.Evolution)
    _check_evolution(evolution, schema, person_key, len(timeline))
    questions = _questions(step, persona, schema, gym, lang, persona_id, person_key)
    openings = _openings(step, persona, schema, timeline, evolution.periods, lang)
    return G.Blueprint(
        persona_id=persona_id,
        person_key=person_key,
        language=lang,
        persona=persona,
        state_schema=schema,
        periods=timeline,
        states=list(evolution.periods),
        questions=questions,
        openings=openings,
    )


def _fail(person_key: str, stage: Any, problem: str) -> GymDataError:
    return GymDataError(f"persona {person_key}: stage {stage.name}: {problem}")


def _check_schema(schema: G.StateSchema, key: str, gym: GymConfig) -> None:
    names = [v.name for v in schema.variables]
    if len(set(names)) != len(names):
        raise _fail(key, GS.SCHEMA, "two variables share a name")
    if len(names) < gym.states_per_question:
        raise _fail(
            key,
            GS.SCHEMA,
            f"{len(names)} variables, fewer than gym.states_per_question "
            f"({gym.states_per_question})",
        )
    phrases = [val.lower() for v in schema.variables for val in v.values]
    if len(set(phrases)) != len(phrases):
        raise _fail(
            key,
            GS.SCHEMA,
            "a value phrase appears twice (values must be distinct across variables)",
        )


def _check_evolution(evolution: G.Evolution, schema: G.StateSchema, key: str, n: int) -> None:
    if [p.period for p in evolution.periods] != list(range(n)):
        raise _fail(
            key,
            GS.EVOLUTION,
            f"expected periods 0..{n - 1} in order, got {[p.period for p in evolution.periods]}",
        )
    for p in evolution.periods:
        given = {s.variable: s.value for s in p.states}
        for v in schema.variables:
            if given.get(v.name) not in v.values:
                raise _fail(
                    key,
                    GS.EVOLUTION,
                    f"period {p.period}: {v.name}={given.get(v.name)!r} is not one of its values",
                )
        if len(given) != len(schema.variables) or len(p.states) != len(given):
            raise _fail(key, GS.EVOLUTION, f"period {p.period}: not one value per variable")


def _questions(
    step: Step,
    persona: G.PersonaCard,
    schema: G.StateSchema,
    gym: GymConfig,
    lang: str,
    persona_id: str,
    key: str,
) -> list[G.GymQuestion]:
    plans = step(
        GS.QUESTIONS,
        G.QuestionsInput(
            persona=persona,
            state_schema=schema,
            count=gym.questions,
            states_per_question=gym.states_per_question,
            language=lang,
        ),
        "questions",
    )
    assert isinstance(plans, G.QuestionsOut)
    if len(plans.questions) != gym.questions:
        raise _fail(
            key, GS.QUESTIONS, f"{len(plans.questions)} questions, asked for {gym.questions}"
        )
    out = []
    for i, plan in enumerate(plans.questions):
        names = list(dict.fromkeys(plan.variables))
        if len(names) != gym.states_per_question or any(
            n not in {v.name for v in schema.variables} for n in names
        ):
            raise _fail(
                key,
                GS.QUESTIONS,
                f"question {i + 1} depends on {plan.variables}: expected "
                f"{gym.states_per_question} distinct variables of the schema",
            )
        variables = [schema.variable(n) for n in names]
        variants = [
            [G.StateValue(variable=v.name, value=x) for v, x in zip(variables, combo, strict=True)]
            for combo in itertools.product(*(v.values for v in variables))
        ]
        opts = step(
            GS.OPTIONS,
            G.OptionsInput(
                persona=persona,
                question=plan.question,
                variables=variables,
                variants=variants,
                language=lang,
            ),
            f"options{i + 1}",
        )
        assert isinstance(opts, G.OptionsOut)
        given = [sorted((s.variable, s.value) for s in o.variant) for o in opts.options]
        if sorted(given) != sorted(sorted((s.variable, s.value) for s in v) for v in variants):
            raise _fail(
                key, GS.OPTIONS, f"question {i + 1}: the options are not one per state combination"
            )
        choices = [
            G.GymChoice(id=_choice_id(j), text=o.text, variant=list(o.variant))
            for j, o in enumerate(opts.options)
        ]
        out.append(
            G.GymQuestion(
                question_id=content_id(persona_id, "gym-question", i),
                question=plan.question,
                variables=names,
                choices=choices,
            )
        )
    return out


def _choice_id(index: int) -> str:
    letters = string.ascii_uppercase
    return (
        letters[index]
        if index < len(letters)
        else f"{letters[index // 26 - 1]}{letters[index % 26]}"
    )


def exposed_per_period(
    schema: G.StateSchema, states: list[G.PeriodStates]
) -> list[list[list[G.StateValue]]]:
    """Per period, the states each of its openings reveals: every variable in the first period (a few per
    opening), then what changed since the period before (or, if nothing did, the first variable again)."""
    out = []
    for t, p in enumerate(states):
        now = {s.variable: s.value for s in p.states}
        if t == 0:
            names = [v.name for v in schema.variables]
        else:
            before = {s.variable: s.value for s in states[t - 1].states}
            names = [v.name for v in schema.variables if now[v.name] != before[v.name]] or [
                schema.variables[0].name
            ]
        chunks = [names[i : i + OPENING_STATES] for i in range(0, len(names), OPENING_STATES)]
        out.append([[G.StateValue(variable=n, value=now[n]) for n in chunk] for chunk in chunks])
    return out


def _openings(
    step: Step,
    persona: G.PersonaCard,
    schema: G.StateSchema,
    timeline: list[G.PeriodEvent],
    states: list[G.PeriodStates],
    lang: str,
) -> list[G.Opening]:
    labels = {v.name: v.label for v in schema.variables}
    out = []
    for t, chunks in enumerate(exposed_per_period(schema, states)):
        for i, exposed in enumerate(chunks):
            utt = step(
                GS.UTTERANCE,
                G.UtteranceInput(
                    persona=persona,
                    event=timeline[t],
                    language=lang,
                    exposed=[
                        G.LabeledState(variable=s.variable, label=labels[s.variable], value=s.value)
                        for s in exposed
                    ],
                ),
                f"P{t}U{i + 1}",
            )
            assert isinstance(utt, G.Utterance)
            seen = step(
                GS.EXPOSURE,
                G.ExposureInput(utterance=utt.text, state_schema=schema, language=lang),
                f"P{t}U{i + 1}-check",
            )
            assert isinstance(seen, G.ExposureOut)
            recovered = {(s.variable, s.value) for s in seen.states}
            out.append(
                G.Opening(
                    period=t,
                    index=i,
                    text=utt.text,
                    exposed=exposed,
                    recovered=list(seen.states),
                    ok=all((s.variable, s.value) in recovered for s in exposed),
                )
            )
    return out


def exposure_rate(blueprints: list[G.Blueprint]) -> float:
    openings = [o for b in blueprints for o in b.openings]
    return sum(o.ok for o in openings) / len(openings) if openings else 0.0
