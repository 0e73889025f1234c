"""On-policy evaluation (the gym, after AMemGym): the structured data of a persona (state schema, state
evolution over periods, state-dependent questions, state-bearing openings), the inputs and outputs of
its LLM steps, and the result of a gym run (also the `clonemem gym --json` contract)."""

from __future__ import annotations

import datetime as dt
import re

from pydantic import BaseModel, ConfigDict, Field

from clonemem.schemas.config import Language
from clonemem.schemas.versions import GYM


def values_in(text: str, values: list[str] | tuple[str, ...]) -> list[str]:
    """The value phrases named in ``text`` as whole words (case-insensitive), ordered by their last
    occurrence (the last is the one meant): how a state is read from a text by the offline world and
    by the write/read diagnosis."""
    found = []
    for v in values:
        ends = [
            m.end()
            for m in re.finditer(r"(?<!\w)" + re.escape(v.lower()) + r"(?!\w)", text.lower())
        ]
        if ends:
            found.append((max(ends), v))
    return [v for _, v in sorted(found)]


class _M(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


# -- grounding ------------------------------------------------------------------------------------


class PersonaCard(_M):
    """What the gym's steps see of a persona (its profile, stage I)."""

    name: str
    age: int
    occupation: str
    city: str
    personality: str
    interests: list[str]
    concerns: list[str]
    narrative: str


class PeriodEvent(_M):
    """A period of the interaction, tied to the life event the persona lives through in it."""

    period: int = Field(ge=0)
    date: dt.date
    title: str
    description: str


# -- structured data (the blueprint) ----------------------------------------------------------------


class StateVariable(_M):
    name: str = Field(pattern=r"^[a-z][a-z0-9_]*$")  # snake_case key
    label: str = Field(min_length=1)  # how the persona calls it ("exercise routine")
    values: list[str] = Field(min_length=2, max_length=4)  # the possible values, distinct


class StateSchemaInput(_M):
    persona: PersonaCard
    arc_themes: list[str]  # what the persona's life arcs are about (stage I)
    count: int = Field(ge=2)
    language: Language


class StateSchema(_M):
    variables: list[StateVariable] = Field(min_length=2)

    def variable(self, name: str) -> StateVariable:
        for v in self.variables:
            if v.name == name:
                return v
        raise KeyError(name)


class StateValue(_M):
    variable: str
    value: str


class EvolutionInput(_M):
    persona: PersonaCard
    state_schema: StateSchema
    periods: list[PeriodEvent]  # period 0 (the initial states) first, then one per change
    language: Language


class PeriodStates(_M):
    period: int = Field(ge=0)
    states: list[StateValue]  # a full assignment: every variable of the schema


class Evolution(_M):
    periods: list[PeriodStates] = Field(min_length=1)


class QuestionsInput(_M):
    persona: PersonaCard
    state_schema: StateSchema
    count: int = Field(ge=1)
    states_per_question: int = Field(ge=1)
    language: Language


class QuestionPlan(_M):
    question: str = Field(min_length=1)
    variables: list[str] = Field(min_length=1)  # the state variables the right answer depends on


class QuestionsOut(_M):
    questions: list[QuestionPlan] = Field(min_length=1)


class OptionsInput(_M):
    persona: PersonaCard
    question: str
    variables: list[StateVariable]
    variants: list[list[StateValue]]  # every combination of the variables' values: one option each
    language: Language


class VariantOption(_M):
    variant: list[StateValue]
    text: str = Field(min_length=1)


class OptionsOut(_M):
    options: list[VariantOption] = Field(min_length=2)


class LabeledState(_M):
    variable: str
    label: str
    value: str


class UtteranceInput(_M):
    persona: PersonaCard
    event: PeriodEvent
    exposed: list[LabeledState] = Field(min_length=1)
    language: Language


class Utterance(_M):
    text: str = Field(min_length=1)


class ExposureInput(_M):
    utterance: str
    state_schema: StateSchema
    language: Language


class ExposureOut(_M):
    states: list[StateValue]  # every state the utterance reveals, as the validator reads it


class Opening(_M):
    """A state-bearing utterance that opens a session of period ``period``, and whether the validator
    recovered the states it was written to expose (the exposure check)."""

    period: int
    index: int
    text: str
    exposed: list[StateValue]
    recovered: list[StateValue]
    ok: bool


class GymChoice(_M):
    id: str
    text: str
    variant: list[StateValue]


class GymQuestion(_M):
    question_id: str
    question: str
    variables: list[str]
    choices: list[GymChoice]  # one per state combination


class Blueprint(_M):
    """A persona's structured data: everything the interaction and the scoring are grounded in."""

    persona_id: str
    person_key: str
    language: Language
    persona: PersonaCard
    state_schema: StateSchema
    periods: list[PeriodEvent]
    states: list[PeriodStates]  # sigma_0 .. sigma_Np
    questions: list[GymQuestion]
    openings: list[Opening]

    def state_at(self, period: int) -> dict[str, str]:
        return {s.variable: s.value for s in self.states[period].states}

    def correct_choice(self, question: GymQuestion, period: int) -> str:
        states = self.state_at(period)
        for c in question.choices:
            if all(states[s.variable] == s.value for s in c.variant):
                return c.id
        raise ValueError(
            f"question {question.question_id}: no choice for the states of period {period}"
        )


# -- interaction ----------------------------------------------------------------------------------------


class Message(_M):
    speaker: str = Field(pattern=r"^(user|assistant)$")
    text: str


class UserTurnInput(_M):
    persona: PersonaCard
    states: list[
        LabeledState
    ]  # the current states: all the simulated user knows beside the profile
    event: PeriodEvent
    dialogue: list[Message]  # the session so far
    language: Language


class UserTurn(_M):
    text: str = Field(min_length=1)


class AssistantInput(_M):
    memories: list[str]  # what the assistant's memory returned for the user's last message
    dialogue: list[Message]  # the session so far
    language: Language


class AssistantReply(_M):
    text: str = Field(min_length=1)


class GymAnswerInput(_M):
    question: str
    choices: list[GymChoice]
    memories: list[str]  # oldest first, each with its date
    language: Language


class GymAnswer(_M):
    choice_id: str
    reason: str = ""


# -- results (the `clonemem gym --json` contract) ------------------------------------------------------


class SystemResult(BaseModel):
    system: str
    accuracy: float
    accuracy_ci: tuple[float, float]
    memory_score: float
    accuracy_by_position: list[float]


class Bounds(BaseModel):
    random: float
    upper: float


class RankChange(BaseModel):
    system: str
    on_policy_rank: int
    off_policy_rank: int


class GymReport(BaseModel):
    """Exactly what `clonemem gym --json` writes."""

    format_version: str = GYM.version  # of the document (schemas/versions.py)
    results: list[SystemResult]
    bounds: Bounds
    rank_change: list[RankChange]
    exposure_rate: float


class SystemDetail(BaseModel):
    """Everything measured of one system (what the table prints and the warehouse keeps)."""

    system: str
    accuracy: float
    accuracy_ci: tuple[float, float]
    memory_score: float
    accuracy_by_position: list[float]
    memory_score_by_position: list[float]
    diagnosis: dict[
        str, float
    ]  # write / read / use / unknown: share of all answers missed for that reason
    off_policy_accuracy: float
    off_policy_memory_score: float
    answers: int


class GymResult(BaseModel):
    """What the gym flow returns: the --json report and the details behind it."""

    config_name: str
    gym_id: str
    personas: int
    periods: int
    states_per_question: int
    turns_per_exposure: int
    reference: str
    exposure_rate: float
    exposure_openings: int
    random_by_position: list[float]
    upper_by_position: list[float]
    systems: list[SystemDetail]
    report: GymReport
    llm_calls: int = 0
    landed: bool = False
    seconds: float = 0.0
