"""Offline handlers of the gym's stages: deterministic, and meaningful enough to measure memory.

The state variables come from a small English lexicon whose value phrases are distinct (none contains
another), so a state can be recovered from a text by finding its value phrase: the exposure validator
does that, the simulated user states its current values in those words, the offline assistant never
repeats a value (it acknowledges, or asks to be reminded when its memory returned nothing relevant),
and the offline answerer believes, per variable, the value in the latest memory that names one.
"""

from __future__ import annotations

import itertools

from clonemem import text as textutil
from clonemem.offline import OfflineCall
from clonemem.schemas import gym as G
from clonemem.schemas.gym import values_in

# (name, label, values): value phrases are unique across the lexicon and none is inside another
VARIABLES: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    (
        "exercise_routine",
        "exercise routine",
        ("morning runs", "swimming laps", "yoga classes", "cycling to work"),
    ),
    (
        "living_situation",
        "living situation",
        ("living alone", "sharing a flat", "living with my partner", "staying with family"),
    ),
    (
        "work_arrangement",
        "work arrangement",
        ("fully remote", "in the office daily", "a hybrid schedule"),
    ),
    (
        "eating_habits",
        "eating habits",
        ("vegetarian meals", "meal prepping", "eating out a lot", "a low-sugar diet"),
    ),
    ("spending_mood", "spending mood", ("saving hard", "a comfortable budget", "a tight month")),
    (
        "learning_goal",
        "learning goal",
        ("learning spanish", "a data course", "guitar lessons", "a pottery class"),
    ),
    ("sleep_pattern", "sleep pattern", ("early nights", "late nights", "broken sleep")),
    ("commute", "commute", ("taking the train", "driving in", "walking over")),
    (
        "social_life",
        "social life",
        ("quiet weekends", "busy weekends with friends", "weekly game nights"),
    ),
    ("travel_plans", "travel plans", ("a beach trip", "a city break", "no trips this year")),
    ("stress_level", "stress level", ("feeling calm", "stretched thin", "completely overwhelmed")),
    ("pet_situation", "pet situation", ("no pets", "a new puppy", "an old cat")),
)

TOPICS = (
    "my next free weekend",
    "the coming month",
    "a small gift for myself",
    "my evenings this week",
    "a birthday celebration",
    "my morning schedule",
    "a weekend getaway",
    "a new hobby budget",
    "my health goals",
    "a dinner with friends",
    "my reading list",
    "my next day off",
)
OPENERS = (
    "{event} has shifted a few things for me.",
    "With {event}, my days look different.",
    "Since {event}, I've been adjusting.",
    "A quick update after {event}.",
)
STATE_LINES = (
    "My {label} these days: {value}.",
    "On the {label} front, it's {value} now.",
    "As for my {label}, it's {value} at the moment.",
    "Right now my {label} is {value}.",
)
CHAT_LINES = (
    "I've been thinking about {interest} a lot lately.",
    "Do you have any thoughts on {interest}?",
    "Honestly, {concern} is on my mind today.",
    "I might spend some time on {interest} tonight.",
    "What would you suggest to keep {interest} fun?",
    "I keep coming back to {concern}.",
)
REMIND = "remind me"


# -- structured data ---------------------------------------------------------------------------------


def state_schema(call: OfflineCall) -> G.StateSchema:
    inp = call.inputs
    assert isinstance(inp, G.StateSchemaInput)
    chosen = call.rng.sample(VARIABLES, min(inp.count, len(VARIABLES)))
    return G.StateSchema(
        variables=[
            G.StateVariable(name=n, label=label, values=list(values))
            for n, label, values in sorted(chosen)
        ]
    )


def evolution(call: OfflineCall) -> G.Evolution:
    """Initial states at random; each later period's event changes one variable (two now and then)."""
    inp = call.inputs
    assert isinstance(inp, G.EvolutionInput)
    rng, variables = call.rng, inp.state_schema.variables
    states = {v.name: rng.choice(v.values) for v in variables}
    out = []
    for period in inp.periods:
        if period.period > 0:
            for v in rng.sample(variables, 2 if rng.random() < 0.3 else 1):
                states[v.name] = rng.choice([x for x in v.values if x != states[v.name]])
        out.append(
            G.PeriodStates(
                period=period.period,
                states=[G.StateValue(variable=v.name, value=states[v.name]) for v in variables],
            )
        )
    return G.Evolution(periods=out)


def questions(call: OfflineCall) -> G.QuestionsOut:
    """Questions over every pair (or triple) of variables in turn, so each variable is asked about."""
    inp = call.inputs
    assert isinstance(inp, G.QuestionsInput)
    variables = inp.state_schema.variables
    combos = list(itertools.combinations(variables, min(inp.states_per_question, len(variables))))
    call.rng.shuffle(combos)
    plans = []
    for i in range(inp.count):
        combo = combos[i % len(combos)]
        labels = " and my ".join(v.label for v in combo)
        plans.append(
            G.QuestionPlan(
                question=f"Given my {labels} as they are now, what should I plan for "
                f"{TOPICS[i % len(TOPICS)]}?",
                variables=[v.name for v in combo],
            )
        )
    return G.QuestionsOut(questions=plans)


def options(call: OfflineCall) -> G.OptionsOut:
    inp = call.inputs
    assert isinstance(inp, G.OptionsInput)
    labels = {v.name: v.label for v in inp.variables}
    out = []
    for variant in inp.variants:
        because = " and ".join(f"your {labels[s.variable]} means {s.value}" for s in variant)
        out.append(
            G.VariantOption(variant=variant, text=f"Since {because}, plan around exactly that.")
        )
    return G.OptionsOut(options=out)


def utterance(call: OfflineCall) -> G.Utterance:
    inp = call.inputs
    assert isinstance(inp, G.UtteranceInput)
    rng = call.rng
    lines = [rng.choice(OPENERS).format(event=inp.event.title.rstrip(".").lower())]
    lines += [rng.choice(STATE_LINES).format(label=s.label, value=s.value) for s in inp.exposed]
    return G.Utterance(text=" ".join(lines))


def exposure(call: OfflineCall) -> G.ExposureOut:
    """Every variable whose value the utterance names unambiguously (exactly one of its values)."""
    inp = call.inputs
    assert isinstance(inp, G.ExposureInput)
    found = []
    for v in inp.state_schema.variables:
        named = values_in(inp.utterance, v.values)
        if len(named) == 1:
            found.append(G.StateValue(variable=v.name, value=named[0]))
    return G.ExposureOut(states=found)


# -- interaction -------------------------------------------------------------------------------------


def user_turn(call: OfflineCall) -> G.UserTurn:
    """In character from the profile and the current states only: asked to remind, the user restates the
    state they were talking about (or one at random); otherwise they chat, now and then mentioning a
    current state in passing."""
    inp = call.inputs
    assert isinstance(inp, G.UserTurnInput)
    rng = call.rng
    last = inp.dialogue[-1].text if inp.dialogue else ""
    if REMIND in last.lower():
        said = " ".join(m.text for m in inp.dialogue if m.speaker == "user").lower()
        talked = [s for s in inp.states if s.label in said]
        s = talked[-1] if talked else rng.choice(inp.states)
        return G.UserTurn(text=f"Sure. My {s.label} is {s.value} right now.")
    if rng.random() < 0.2:
        s = rng.choice(inp.states)
        return G.UserTurn(text=f"By the way, my {s.label} is still {s.value}.")
    line = rng.choice(CHAT_LINES)
    return G.UserTurn(
        text=line.format(
            interest=rng.choice(inp.persona.interests), concern=rng.choice(inp.persona.concerns)
        )
    )


def _relevant(memory: str, said: set[str]) -> bool:
    return len(said & set(textutil.content_words(memory))) >= 2


def assistant_reply(call: OfflineCall) -> G.AssistantReply:
    """Acknowledge what memory brought back, or ask to be reminded when it brought back nothing
    relevant to the user's last message. Never repeats a value (it would pass for the user's word)."""
    inp = call.inputs
    assert isinstance(inp, G.AssistantInput)
    last = next((m.text for m in reversed(inp.dialogue) if m.speaker == "user"), "")
    said = set(textutil.content_words(last))
    relevant = sum(1 for m in inp.memories if _relevant(m, said))
    if not relevant:
        return G.AssistantReply(
            text="Thanks for telling me. Could you remind me where things stand with that?"
        )
    return G.AssistantReply(
        text=f"Thanks, that fits with {relevant} thing(s) you told me before. "
        "How are you feeling about it?"
    )


def answer(call: OfflineCall) -> G.GymAnswer:
    """Per variable, believe the value named by the latest memory that names one of its values; pick
    the choice that agrees with every belief, guessing among those that agree when a variable is unknown."""
    inp = call.inputs
    assert isinstance(inp, G.GymAnswerInput)
    candidates: dict[str, list[str]] = {}
    for c in inp.choices:
        for s in c.variant:
            candidates.setdefault(s.variable, [])
            if s.value not in candidates[s.variable]:
                candidates[s.variable].append(s.value)
    believed: dict[str, str] = {}
    for variable, values in candidates.items():
        for memory in reversed(inp.memories):
            named = values_in(memory, values)
            if named:
                believed[variable] = named[-1]
                break
    agreeing = [
        c
        for c in inp.choices
        if all(believed.get(s.variable, s.value) == s.value for s in c.variant)
    ]
    pool = agreeing or list(inp.choices)
    choice = pool[0] if len(pool) == 1 else call.rng.choice(pool)
    return G.GymAnswer(
        choice_id=choice.id, reason=f"memory settles {len(believed)} of {len(candidates)} states"
    )
