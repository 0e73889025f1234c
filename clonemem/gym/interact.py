"""The on-policy interaction: a simulated user talks to the assistant under test, period by period, and
the assistant's memory is asked the state-dependent questions after each period.

Per period ``t`` each session opens with one of the period's state-bearing openings; the assistant (the
answerer role, reading what its memory recalls for the user's message) replies; the simulated user
(the ``user_sim`` role, which sees only the profile, the current states, the period's event and the
session) goes on for ``turns_per_exposure`` turns, each answered by the assistant. The memory ingests
every exchange as it happens (``MemorySystem.ingest``), so what it stores depends on what the assistant
said. After the period every question is asked at evaluation position ``t`` (N_p + 1 positions).

Off-policy, the same memory ingests a fixed transcript (one reference assistant's interaction) and
is asked the same questions at the same positions: what the benchmark would measure without letting
the assistant take part in the conversation.

An assistant here is a memory plus the answerer: a registered memory system, or one of two controls:
``oracle_states`` recalls the persona's true current states (the upper bound: memory is bypassed) and
``no_memory`` recalls nothing.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from pydantic import BaseModel

from clonemem.gym import stages as GS
from clonemem.ids import content_id
from clonemem.memory.base import BuildContext, MemorySystem, MemoryTrace, QuestionView, Retrieved
from clonemem.schemas import gym as G
from clonemem.schemas.config import GymConfig

# (stage, input) -> output, through the stage's role model (the caller records the calls)
LLM = Callable[[Any, BaseModel], BaseModel]
ORACLE_STATES, NO_MEMORY = "oracle_states", "no_memory"
CONTROLS = (ORACLE_STATES, NO_MEMORY)
SESSION_START = dt.time(9, 0)
ASKED_AT = dt.time(23, 0)  # questions of a position are asked at the end of its period's day


class Turn(BaseModel):
    """One message of the interaction, as the memory receives it."""

    trace_id: str
    period: int
    session: int
    turn: int
    speaker: str
    text: str
    at: dt.datetime


class Answered(BaseModel):
    """One question at one evaluation position."""

    position: int
    question_id: str
    choice_id: str
    correct_id: str
    correct: bool
    options: int
    diagnosis: str  # correct | write | read | use | unknown (the memory cannot list what it stores)


class Interaction(BaseModel):
    system: str
    persona_id: str
    policy: str  # on | off
    turns: list[Turn]
    answers: list[Answered]


class Assistant(Protocol):
    """What the loop needs of a memory: take in messages, recall for a query, list what it stores."""

    def observe(self, turns: Sequence[Turn]) -> None: ...

    def recall(self, query_id: str, query: str, at: dt.datetime, k: int) -> list[Retrieved]: ...

    def stored(self, at: dt.datetime) -> list[Retrieved] | None: ...


@dataclass
class MemoryAssistant:
    """A registered memory system fed by incremental ingest."""

    memory: MemorySystem
    ctx: BuildContext

    fed: bool = False  # nothing ingested yet: an empty memory recalls nothing (systems expect a build first)

    def __post_init__(self) -> None:
        self.memory.reset(self.ctx)

    def observe(self, turns: Sequence[Turn]) -> None:
        self.fed = True
        self.memory.ingest(
            [
                MemoryTrace(t.trace_id, "chat_private", t.at, f"{t.speaker}: {t.text}")
                for t in turns
            ],
            self.ctx,
        )

    def recall(self, query_id: str, query: str, at: dt.datetime, k: int) -> list[Retrieved]:
        if not self.fed:
            return []
        items = self.memory.retrieve(QuestionView(query_id, query, at), k)
        return items if self.memory.ignores_k else items[:k]

    def stored(self, at: dt.datetime) -> list[Retrieved] | None:
        if not self.fed:
            return []
        try:
            return self.memory.stored(at)
        except NotImplementedError:
            return None


@dataclass
class StatesAssistant:
    """The upper bound: recalls the persona's true states of the period in force (memory bypassed)."""

    blueprint: G.Blueprint
    current: int = 0

    def observe(self, turns: Sequence[Turn]) -> None:
        if turns:
            self.current = turns[-1].period

    def recall(self, query_id: str, query: str, at: dt.datetime, k: int) -> list[Retrieved]:
        return _states_items(self.blueprint, self.current)

    def stored(self, at: dt.datetime) -> list[Retrieved] | None:
        return _states_items(self.blueprint, self.current)


def _states_items(blueprint: G.Blueprint, period: int) -> list[Retrieved]:
    labels = {v.name: v.label for v in blueprint.state_schema.variables}
    return [
        Retrieved(
            f"user: My {labels[s.variable]} is {s.value}.",
            (f"state:{period}:{s.variable}",),
            1.0,
            "state",
        )
        for s in blueprint.states[period].states
    ]


@dataclass
class NoMemory:
    """Recalls nothing: the assistant can only guess (near the random bound)."""

    def observe(self, turns: Sequence[Turn]) -> None:
        """Nothing is kept."""

    def recall(self, query_id: str, query: str, at: dt.datetime, k: int) -> list[Retrieved]:
        return []

    def stored(self, at: dt.datetime) -> list[Retrieved] | None:
        return []


# -- the loop ------------------------------------------------------------------------------------------


@dataclass
class _Log:
    """The interaction so far: its turns, and when each trace id was said (to date recalled items)."""

    persona_id: str
    turns: list[Turn] = field(default_factory=list)
    when: dict[str, dt.datetime] = field(default_factory=dict)

    def add(
        self, period: int, session: int, turn: int, speaker: str, text: str, at: dt.datetime
    ) -> Turn:
        t = Turn(
            trace_id=content_id(self.persona_id, "gym-turn", period, session, turn, speaker),
            period=period,
            session=session,
            turn=turn,
            speaker=speaker,
            text=text,
            at=at,
        )
        self.turns.append(t)
        self.when[t.trace_id] = at
        return t

    def dated(self, items: Sequence[Retrieved]) -> list[str]:
        """Recalled items oldest first, each with its date (a later memory overrides an earlier one)."""

        def at(item: Retrieved) -> dt.datetime:
            return max(
                (self.when[i] for i in item.trace_ids if i in self.when), default=dt.datetime.min
            )

        return [
            f"[{at(i):%Y-%m-%d %H:%M}] {i.text}" if at(i) > dt.datetime.min else i.text
            for i in sorted(items, key=at)
        ]


def interact(
    blueprint: G.Blueprint, assistant: Assistant, llm: LLM, gym: GymConfig, system: str
) -> Interaction:
    """The on-policy run of one assistant with one persona's simulated user."""
    log = _Log(blueprint.persona_id)
    labels = {v.name: v.label for v in blueprint.state_schema.variables}
    answers: list[Answered] = []
    lang = blueprint.language
    for period in blueprint.periods:
        t = period.period
        states = [
            G.LabeledState(variable=s.variable, label=labels[s.variable], value=s.value)
            for s in blueprint.states[t].states
        ]
        for opening in [o for o in blueprint.openings if o.period == t]:
            at = dt.datetime.combine(period.date, SESSION_START) + dt.timedelta(hours=opening.index)
            session: list[G.Message] = []
            said = opening.text
            for turn in range(gym.turns_per_exposure + 1):
                user = log.add(
                    t, opening.index, turn, "user", said, at + dt.timedelta(minutes=2 * turn)
                )
                session.append(G.Message(speaker="user", text=said))
                memories = log.dated(assistant.recall(user.trace_id, said, user.at, gym.k))
                reply = llm(
                    GS.ASSISTANT,
                    G.AssistantInput(memories=memories, dialogue=session, language=lang),
                )
                assert isinstance(reply, G.AssistantReply)
                session.append(G.Message(speaker="assistant", text=reply.text))
                answer = log.add(
                    t,
                    opening.index,
                    turn,
                    "assistant",
                    reply.text,
                    user.at + dt.timedelta(minutes=1),
                )
                assistant.observe([user, answer])  # the memory takes in the exchange as it happens
                if turn < gym.turns_per_exposure:
                    nxt = llm(
                        GS.USER_TURN,
                        G.UserTurnInput(
                            persona=blueprint.persona,
                            states=states,
                            event=period,
                            dialogue=session,
                            language=lang,
                        ),
                    )
                    assert isinstance(nxt, G.UserTurn)
                    said = nxt.text
        answers += ask(blueprint, assistant, llm, gym, t, log)
    return Interaction(
        system=system,
        persona_id=blueprint.persona_id,
        policy="on",
        turns=log.turns,
        answers=answers,
    )


def replay(
    blueprint: G.Blueprint,
    assistant: Assistant,
    llm: LLM,
    gym: GymConfig,
    system: str,
    transcript: Sequence[Turn],
) -> Interaction:
    """The off-policy run: the memory ingests a fixed transcript exchange by exchange (nobody talks to
    the assistant) and is asked the same questions at the same positions."""
    log = _Log(blueprint.persona_id)
    answers: list[Answered] = []
    for period in blueprint.periods:
        said = [t for t in transcript if t.period == period.period]
        for i in range(0, len(said), 2):
            pair = said[i : i + 2]
            for t in pair:
                log.turns.append(t)
                log.when[t.trace_id] = t.at
            assistant.observe(pair)
        answers += ask(blueprint, assistant, llm, gym, period.period, log)
    return Interaction(
        system=system,
        persona_id=blueprint.persona_id,
        policy="off",
        turns=log.turns,
        answers=answers,
    )


def ask(
    blueprint: G.Blueprint, assistant: Assistant, llm: LLM, gym: GymConfig, position: int, log: _Log
) -> list[Answered]:
    """Every question at evaluation position ``position``, with the write/read/use diagnosis of each miss."""
    at = dt.datetime.combine(blueprint.periods[position].date, ASKED_AT)
    truth = blueprint.state_at(position)
    stored: list[
        list[Retrieved] | None
    ] = []  # what the memory holds at ``at``, listed at the first miss
    out = []
    for q in blueprint.questions:
        items = assistant.recall(f"{q.question_id}@{position}", q.question, at, gym.k)
        got = llm(
            GS.ANSWER,
            G.GymAnswerInput(
                question=q.question,
                choices=q.choices,
                memories=log.dated(items),
                language=blueprint.language,
            ),
        )
        assert isinstance(got, G.GymAnswer)
        correct_id = blueprint.correct_choice(q, position)
        chosen = got.choice_id.strip().rstrip(".):").upper()  # a live model may write "b." or "B)"
        correct = chosen == correct_id
        if correct:
            diagnosis = "correct"
        else:
            if not stored:
                stored.append(assistant.stored(at))
            diagnosis = diagnose(blueprint, q, truth, items, stored[0], log.when)
        out.append(
            Answered(
                position=position,
                question_id=q.question_id,
                choice_id=chosen,
                correct_id=correct_id,
                correct=correct,
                options=len(q.choices),
                diagnosis=diagnosis,
            )
        )
    return out


def believed(
    blueprint: G.Blueprint, variable: str, items: Sequence[Retrieved], when: dict[str, dt.datetime]
) -> str | None:
    """The value of ``variable`` the latest of ``items`` that names one of its values says."""
    values = blueprint.state_schema.variable(variable).values

    def at(item: Retrieved) -> dt.datetime:
        return max((when[i] for i in item.trace_ids if i in when), default=dt.datetime.min)

    for item in sorted(items, key=at, reverse=True):
        named = G.values_in(item.text, values)
        if named:
            return named[-1]
    return None


def diagnose(
    blueprint: G.Blueprint,
    q: G.GymQuestion,
    truth: dict[str, str],
    recalled: Sequence[Retrieved],
    stored: Sequence[Retrieved] | None,
    when: dict[str, dt.datetime],
) -> str:
    """Why a question was missed (after AMemGym): ``use`` when what was read holds every required state's
    current value, else ``read`` when the memory stores them all, else ``write``; ``unknown`` when the
    memory cannot list what it stores. A state is held by a set of items when the latest item naming one
    of the variable's values names the current one."""

    def holds(items: Sequence[Retrieved]) -> bool:
        return all(believed(blueprint, v, items, when) == truth[v] for v in q.variables)

    if holds(recalled):
        return "use"
    if stored is None:
        return "unknown"
    return "read" if holds(stored) else "write"
