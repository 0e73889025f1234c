"""Inputs and outputs of generation stages I–III (CloneMem A.2–A.4).

Each ``*Input`` is what a stage's prompt is rendered from and what the offline provider builds its
answer from; each ``*Out`` is the schema the model's JSON must validate against. Inputs carry only
what the stage needs (a brief of the persona, the current snapshot, the previous phase), so prompt
size stays bounded however long the timeline grows.
"""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from clonemem.schemas.config import Dimension, Language

Score = Annotated[float, Field(ge=0.0, le=1.0)]
Level = Annotated[int, Field(ge=0, le=10)]
Tone = Literal["stressful", "strained", "steady", "hopeful", "relieved", "joyful"]
EvidenceKind = Literal["fact", "emotion", "opinion"]


class _M(BaseModel):
    model_config = ConfigDict(frozen=True)


# -- stage I: persona and macro plan -----------------------------------------------------------


class BigFive(_M):
    openness: Score
    conscientiousness: Score
    extraversion: Score
    agreeableness: Score
    neuroticism: Score


class PersonaSpec(_M):
    """The fixed input of one persona: its Big Five configuration and timeline."""

    index: int = Field(ge=0)
    big_five: BigFive
    language: Language
    timeline_start: dt.date
    timeline_end: dt.date


class Profile(_M):
    name: str = Field(min_length=1)
    age: int = Field(ge=16, le=90)
    gender: Literal["female", "male", "nonbinary"]
    personality: str
    family: list[str]
    education: str
    occupation: str
    employer: str
    city: str
    concerns: list[str] = Field(min_length=1)
    interests: list[str] = Field(min_length=1)
    narrative: str


class Relation(_M):
    name: str = Field(min_length=1)
    relation_type: Literal["family", "partner", "colleague", "friend"]
    role: str  # mother, manager, climbing partner, ...
    description: str


class RelationsInput(_M):
    profile: Profile
    language: Language


class RelationsOut(_M):
    relations: list[Relation] = Field(min_length=3)


class SeedConcept(_M):
    concept: str
    label: str
    description: str


class SeedsInput(_M):
    profile: Profile
    pool: list[SeedConcept]
    max_from_pool: int = Field(ge=1)
    max_added: int = Field(ge=0)
    language: Language


class ChosenSeed(_M):
    concept: str
    label: str
    origin: Literal["pool", "persona"]
    rationale: str


class SeedsOut(_M):
    seeds: list[ChosenSeed] = Field(min_length=1)


class AnchorState(_M):
    state: str
    trigger_logic: str
    behavioural_cues: str


class LifeArc(_M):
    key: str  # "A1", "A2", ...: how later stages refer to the arc
    dimension: Dimension
    theme: str  # short snake_case tag of what the arc is about, e.g. "career_change"
    title: str
    description: str
    seed_concept: str
    anchor_states: list[AnchorState] = Field(min_length=3)


class ArcsInput(_M):
    profile: Profile
    relations: list[Relation]
    seeds: list[ChosenSeed]
    arcs_per_dimension: int = Field(ge=1)
    language: Language


class ArcsOut(_M):
    arcs: list[LifeArc] = Field(min_length=3)


class ArcAlignment(_M):
    arc_key: str
    anchor_index: int = Field(ge=0)


# -- stage I: privacy boundaries (who may know which sensitive matter) -----------------------------

PrivacyCategory = Literal["health", "money", "conflict", "opinion_about", "unshared_plan"]
PRIVACY_CATEGORIES: tuple[str, ...] = (
    "health",
    "money",
    "conflict",
    "opinion_about",
    "unshared_plan",
)


class PrivacyMatter(_M):
    """A sensitive matter of the persona's life: one arc's evidence of the given kinds, and the people
    (relation names) who may know it. Everyone else is outside the boundary; the persona's traces about
    it are only addressed to those people or to the persona alone."""

    key: str  # "S1", "S2", ...
    category: PrivacyCategory
    arc_key: str
    kinds: list[EvidenceKind] = Field(min_length=1)  # which of the arc's evidence is sensitive
    subject: str = Field(min_length=1)  # what the matter is, in a few words
    may_know: list[str]  # relation names; empty: nobody but the persona


class PrivacyInput(_M):
    profile: Profile
    relations: list[Relation]
    arcs: list[LifeArc]
    language: Language


class PrivacyOut(_M):
    matters: list[PrivacyMatter]


class MajorEvent(_M):
    date: dt.date
    title: str
    description: str
    primary_arc: str
    alignments: list[ArcAlignment] = Field(min_length=1)


class MajorEventsInput(_M):
    profile: Profile
    relations: list[Relation]
    arcs: list[LifeArc]
    timeline_start: dt.date
    timeline_end: dt.date
    count: int = Field(ge=1)
    language: Language


class MajorEventsOut(_M):
    events: list[MajorEvent] = Field(min_length=1)


# -- stage II: phases with the carried snapshot ---------------------------------------------------


class ArcStatus(_M):
    arc_key: str
    status: str


class Snapshot(_M):
    """The persona's carried psychological state (Algorithm 1's H)."""

    energy: Level
    stress: Level
    dominant_emotion: str
    attentional_focus: str
    arc_status: list[ArcStatus]


class PersonaBrief(_M):
    """What later stages need of the persona: bounded, whatever the timeline length."""

    name: str
    age: int
    gender: Literal["female", "male", "nonbinary"]
    occupation: str
    employer: str
    city: str
    interests: list[str]
    personality: str


class ArcBrief(_M):
    key: str
    dimension: Dimension
    theme: str
    title: str
    current_state: str
    next_state: str | None
    current_index: int


class InitialSnapshotInput(_M):
    persona: PersonaBrief
    arcs: list[ArcBrief]
    first_event: MajorEvent
    language: Language


class PhaseBrief(_M):
    title: str
    description: str
    tone: Tone


class PhaseInput(_M):
    persona: PersonaBrief
    relations: list[Relation]
    event: MajorEvent
    event_index: int
    arcs: list[ArcBrief]
    snapshot: Snapshot
    phase_index: int
    phase_count: int
    start_date: dt.date
    end_date: dt.date
    previous_phase: PhaseBrief | None
    language: Language


class ArcDevelopment(_M):
    arc_key: str
    development: str


class Phase(_M):
    title: str
    description: str
    start_date: dt.date
    end_date: dt.date
    tone: Tone
    arc_developments: list[ArcDevelopment]


class SnapshotUpdateInput(_M):
    persona: PersonaBrief
    arcs: list[ArcBrief]
    snapshot: Snapshot
    phase: Phase
    language: Language


# -- stage III: detailed events, evidence, traces ---------------------------------------------------


class EvidenceDraft(_M):
    kind: EvidenceKind
    statement: str = Field(min_length=1)
    arc_keys: list[str] = Field(min_length=1)


class DetailedEvent(_M):
    date: dt.date
    title: str
    description: str
    people: list[str]
    place: str
    evidence: list[EvidenceDraft] = Field(min_length=1)


class DetailedEventsInput(_M):
    persona: PersonaBrief
    relations: list[Relation]
    arcs: list[ArcBrief]
    event_title: str
    phase: Phase
    phase_key: str  # stable key of the phase, e.g. "E2P1"
    phase_index: int
    phase_count: int
    primary_arc: str
    snapshot_before: Snapshot
    snapshot_after: Snapshot
    count: int = Field(ge=1)
    evidence_per_event: int = Field(ge=1)
    language: Language


class DetailedEventsOut(_M):
    events: list[DetailedEvent] = Field(min_length=1)


Medium = str  # validated against the configured media mix by the stage, not by the schema


class TracePlan(_M):
    """Step 1 of trace writing: intent, audience and key information, before any prose."""

    medium: Medium
    timestamp: dt.datetime
    intent: str
    audience: str
    key_information: list[str]
    evidence_indices: list[int]  # which of the event's evidence items the trace carries


class TracePlansInput(_M):
    persona: PersonaBrief
    relations: list[Relation]
    event: DetailedEvent
    event_key: str
    snapshot_before: Snapshot
    snapshot_after: Snapshot
    media_mix: dict[str, float]
    count: int = Field(ge=1)
    language: Language
    boundaries: list[PrivacyMatter] = Field(default_factory=list)  # the persona's sensitive matters


class NoisePlansInput(_M):
    persona: PersonaBrief
    relations: list[Relation]
    phase: Phase
    phase_key: str
    media_mix: dict[str, float]
    count: int = Field(ge=1)
    language: Language


class TracePlansOut(_M):
    traces: list[TracePlan]


class TraceWriteInput(_M):
    """Step 2: the content, under the plan's constraints."""

    persona: PersonaBrief
    relations: list[Relation]
    plan: TracePlan
    event_title: str
    event_description: str
    place: str
    people: list[str]
    evidence: list[EvidenceDraft]  # only the evidence the plan carries
    mood: Snapshot
    trace_key: str
    language: Language


class TraceContent(_M):
    content: str = Field(min_length=1)
