"""Every LLM step of generation, as data: name, prompt template, role, input and output schema."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

from pydantic import BaseModel

from clonemem import prompts
from clonemem.llm.model import Model
from clonemem.registry import Registry
from clonemem.schemas import generation as g
from clonemem.schemas.config import Role

I = TypeVar("I", bound=BaseModel)
O = TypeVar("O", bound=BaseModel)

LANGUAGE_NAMES = {"en": "English", "zh": "Chinese (简体中文)"}


@dataclass(frozen=True)
class Stage(Generic[I, O]):
    name: str
    template: str
    role: Role
    inputs: type[I]
    output: type[O]

    def render(self, inp: I) -> prompts.Prompt:
        language = getattr(inp, "language", None) or getattr(getattr(inp, "profile", None), "language", "en")
        return prompts.render(self.template, inp=inp, language_name=LANGUAGE_NAMES.get(language, "English"))

    def run(self, model: Model, inp: I) -> O:
        if not isinstance(inp, self.inputs):
            raise TypeError(f"{self.name} takes {self.inputs.__name__}, not {type(inp).__name__}")
        return model.structured(model.request(self.name, self.render(inp), inp, self.output), self.output)


STAGES: Registry[Stage] = Registry("stage")


def _stage(name: str, template: str, role: Role, inputs: type[BaseModel], output: type[BaseModel]) -> Stage:
    stage = Stage(name, template, role, inputs, output)
    STAGES.add(name, stage)
    return stage


PERSONA = _stage("generation.persona", "gen_persona", "generator", g.PersonaSpec, g.Profile)
RELATIONS = _stage("generation.relations", "gen_relations", "generator", g.RelationsInput, g.RelationsOut)
SEEDS = _stage("generation.seeds", "gen_seeds", "generator", g.SeedsInput, g.SeedsOut)
ARCS = _stage("generation.arcs", "gen_arcs", "generator", g.ArcsInput, g.ArcsOut)
MAJOR_EVENTS = _stage("generation.major_events", "gen_major_events", "generator", g.MajorEventsInput, g.MajorEventsOut)
INITIAL_SNAPSHOT = _stage("generation.initial_snapshot", "gen_initial_snapshot", "generator", g.InitialSnapshotInput, g.Snapshot)
PHASE = _stage("generation.phase", "gen_phase", "generator", g.PhaseInput, g.Phase)
SNAPSHOT_UPDATE = _stage("generation.snapshot_update", "gen_snapshot_update", "generator", g.SnapshotUpdateInput, g.Snapshot)
DETAILED_EVENTS = _stage("generation.detailed_events", "gen_detailed_events", "generator", g.DetailedEventsInput, g.DetailedEventsOut)
TRACE_PLANS = _stage("generation.trace_plans", "gen_trace_plans", "generator", g.TracePlansInput, g.TracePlansOut)
NOISE_PLANS = _stage("generation.noise_plans", "gen_noise_plans", "generator", g.NoisePlansInput, g.TracePlansOut)
TRACE_CONTENT = _stage("generation.trace_content", "gen_trace_content", "generator", g.TraceWriteInput, g.TraceContent)
