"""The gym as Prefect tasks: each persona's structured data (its LLM steps cached one by one, as
generation's), the exposure gate, one interaction per (system, persona, policy) cached on its inputs,
the code it runs and the models of its stages, scoring, and the landing."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from prefect import task
from prefect.cache_policies import INPUTS, NO_CACHE, TASK_SOURCE

from clonemem import ids, runtime
from clonemem.codehash import code_hash
from clonemem.expectations.gym import ExposureGate, exposure_gate, require_exposure
from clonemem.generation.execute import persona_specs, seed_pool
from clonemem.gym import interact as I
from clonemem.gym import stages as GS
from clonemem.gym.blueprint import build_blueprint
from clonemem.gym.land import land_gym
from clonemem.gym.metrics import score
from clonemem.gym.run import check_systems, run_one
from clonemem.llm.types import CallRecord, Paid
from clonemem.schemas import gym as G
from clonemem.schemas.config import GymConfig, RunConfig
from clonemem.schemas.generation import PersonaSpec
from clonemem.stages import STAGES
from clonemem.tasks.caching import (
    MemorySystemPolicy,
    StagePolicy,
    covered_stages,
    step_store,
    transient_only,
)
from clonemem.tasks.generation import cached_stage
from clonemem.warehouse import Warehouse
from clonemem.warehouse.runs import RunRecord

INTERACTION_MODULES = ("clonemem.gym.interact", "clonemem.gym.run")


@dataclass(frozen=True)
class GymPersona:
    spec: PersonaSpec
    persona_id: str
    person_key: str


def gym_personas(config: RunConfig, systems: Sequence[str]) -> list[GymPersona]:
    """The config's personas (generation's specs: the same seeds, so stage I is shared with generation's
    cache); the systems are checked first, so a typo fails before any work."""
    check_systems(systems, config.gym.reference)
    return [
        GymPersona(
            spec,
            ids.persona_id(f"{config.name}-gym", f"p{spec.index + 1:02d}", spec.language),
            f"p{spec.index + 1:02d}",
        )
        for spec in persona_specs(config)
    ]


@task(cache_policy=NO_CACHE, task_run_name="gym data {persona.person_key}")
def blueprint_task(config: RunConfig, persona: GymPersona) -> Paid[G.Blueprint]:
    """The persona's structured data; each LLM step is cached on its own (a re-run makes no call)."""
    store, calls = step_store(), list[CallRecord]()

    def step(stage: Any, inp: Any, item: str) -> Any:
        paid = cached_stage(store, stage.name, item, inp)
        calls.extend(paid.calls)
        return paid.value

    blueprint = build_blueprint(
        step, config, persona.spec, seed_pool(config), persona.persona_id, persona.person_key
    )
    return Paid(blueprint, tuple(calls))


@task(cache_policy=NO_CACHE, task_run_name="gym gate")
def gate_task(blueprints: Sequence[G.Blueprint], min_rate: float) -> ExposureGate:
    """The GX exposure expectation; a failed gate stops the run before any assistant is evaluated."""
    gate = exposure_gate(list(blueprints), min_rate)
    require_exposure(gate)
    return gate


@dataclass
class GymSystemPolicy(MemorySystemPolicy):
    """A memory system's code and stages (as evaluation keys them); a gym control is keyed by the gym's code."""

    def stages(self, inputs: Mapping[str, Any]) -> list[Any]:
        return [] if inputs["system"] in I.CONTROLS else super().stages(inputs)

    def compute_key(
        self, task_ctx: Any, inputs: dict[str, Any], flow_parameters: dict[str, Any], **kwargs: Any
    ) -> str | None:
        if inputs["system"] in I.CONTROLS:
            return ids.stable_hash(inputs["system"] + "|" + code_hash("clonemem.gym.interact"))
        return super().compute_key(task_ctx, inputs, flow_parameters, **kwargs)


@task(
    cache_policy=INPUTS
    + TASK_SOURCE
    + GymSystemPolicy()
    + StagePolicy(
        stage_names=tuple(s.name for s in GS.INTERACTION_STAGES), modules=INTERACTION_MODULES
    ),
    persist_result=True,
    retries=1,
    retry_condition_fn=transient_only,
    task_run_name="gym {policy} {system} {blueprint.person_key}",
)
def interact_task(
    system: str,
    policy: str,
    blueprint: G.Blueprint,
    gym: GymConfig,
    seed: int,
    full_context_tokens: int,
    transcript: Sequence[I.Turn] | None = None,
) -> Paid[I.Interaction]:
    """One assistant with one persona: on-policy with the simulated user, or off-policy on ``transcript``."""

    def body(rec: runtime.Recorder) -> I.Interaction:
        extractor = rec.model("extractor")
        return run_one(
            system,
            blueprint,
            rec.run,
            lambda name, inp: STAGES.get(name).run(extractor, inp),
            gym,
            seed,
            full_context_tokens,
            transcript,
        )

    return runtime.paid(body, covers=covered_stages())


@task(cache_policy=NO_CACHE, task_run_name="gym score")
def score_task(
    config: RunConfig,
    gym_id: str,
    systems: Sequence[str],
    personas: int,
    on: Mapping[str, Sequence[I.Interaction]],
    off: Mapping[str, Sequence[I.Interaction]],
    gate: ExposureGate,
) -> G.GymResult:
    gym = config.gym
    details, random_pos, upper_pos, report = score(
        systems,
        on,
        off,
        on[I.ORACLE_STATES],
        gym.periods + 1,
        config.evaluation.bootstrap_samples,
        config.seed,
    )
    return G.GymResult(
        config_name=config.name,
        gym_id=gym_id,
        personas=personas,
        periods=gym.periods,
        states_per_question=gym.states_per_question,
        turns_per_exposure=gym.turns_per_exposure,
        reference=gym.reference,
        exposure_rate=gate.rate,
        exposure_openings=gate.openings,
        random_by_position=random_pos,
        upper_by_position=upper_pos,
        systems=details,
        report=report.model_copy(update={"exposure_rate": gate.rate}),
    )


@task(cache_policy=NO_CACHE, task_run_name="land gym")
def land_gym_task(
    warehouse_path: str,
    run: RunRecord,
    config: RunConfig,
    systems: Sequence[str],
    blueprints: Sequence[G.Blueprint],
    on: Mapping[str, Sequence[I.Interaction]],
    off: Mapping[str, Sequence[I.Interaction]],
    result: G.GymResult,
    calls: Sequence[CallRecord],
) -> None:
    with Warehouse.open_writer(warehouse_path) as wh:
        land_gym(wh, run, config, systems, blueprints, on, off, result, calls)
