"""The offline world: deterministic handlers, one per stage, that build each stage's output from
its structured inputs (SPEC §7). The offline provider looks handlers up here by stage name."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from pydantic import BaseModel

from clonemem.registry import Registry


@dataclass(frozen=True)
class OfflineCall:
    """What a handler sees: the stage's typed inputs and a generator seeded by (seed, stage, inputs)."""

    stage: str
    inputs: BaseModel | None
    rng: random.Random
    model: str


Handler = Callable[[OfflineCall], BaseModel | str]

HANDLERS: Registry[Handler] = Registry("offline stage handler")
# Stage name -> handler; modules are imported on first use of their stage.
HANDLERS.add_lazy("memory.summarize_trace", "clonemem.offline.memory:summarize_trace")


class ScriptExhausted(RuntimeError):
    """A scripted handler was called more times than it has outputs."""


def scripted(outputs: Iterable[BaseModel | str]) -> Handler:
    """A handler that replays fixed outputs in order and fails loudly when they run out."""
    queue = list(outputs)

    def handler(call: OfflineCall) -> BaseModel | str:
        if not queue:
            raise ScriptExhausted(f"scripted handler for {call.stage!r} has no outputs left")
        return queue.pop(0)

    return handler

# Generation stages I–III: the offline world generator.
for _stage, _target in {
    "generation.persona": "macro:enrich_persona",
    "generation.relations": "macro:relations",
    "generation.seeds": "macro:select_seeds",
    "generation.arcs": "macro:life_arcs",
    "generation.major_events": "macro:major_events",
    "generation.initial_snapshot": "meso:initial_snapshot",
    "generation.phase": "meso:phase",
    "generation.snapshot_update": "meso:update_snapshot",
    "generation.detailed_events": "micro:detailed_events",
    "generation.trace_plans": "micro:trace_plans",
    "generation.noise_plans": "micro:noise_plans",
    "generation.trace_content": "micro:write_trace",
}.items():
    HANDLERS.add_lazy(_stage, "clonemem.offline.world." + _target)

# Stage IV: QA writing and quality control.
for _stage, _target in {
    "qa.plan": "qa:plan",
    "qa.write": "qa:write",
    "qa.sufficiency": "qa:sufficiency",
    "qa.distractors": "qa:distractors",
    "qa.distractor_check": "qa:check_choice",
}.items():
    HANDLERS.add_lazy(_stage, "clonemem.offline.world." + _target)

# Evaluation: the answerer and the judge.
HANDLERS.add_lazy("eval.answer_free", "clonemem.offline.world.evaluation:answer_free")
HANDLERS.add_lazy("eval.answer_choice", "clonemem.offline.world.evaluation:answer_choice")
HANDLERS.add_lazy("eval.judge", "clonemem.offline.world.evaluation:judge")

# Memory systems' own steps: Mem0, A-Mem, O-Mem.
HANDLERS.add_lazy("memory.mem0_extract", "clonemem.offline.world.memsys:mem0_extract")
HANDLERS.add_lazy("memory.mem0_update", "clonemem.offline.world.memsys:mem0_update")
HANDLERS.add_lazy("memory.amem_note", "clonemem.offline.world.memsys:amem_note")
HANDLERS.add_lazy("memory.amem_links", "clonemem.offline.world.memsys:amem_links")
HANDLERS.add_lazy("memory.amem_evolve", "clonemem.offline.world.memsys:amem_evolve")
HANDLERS.add_lazy("memory.omem_extract", "clonemem.offline.world.memsys:omem_extract")
HANDLERS.add_lazy("memory.omem_route", "clonemem.offline.world.memsys:omem_route")
