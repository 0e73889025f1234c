"""The gym (on-policy evaluation after AMemGym): its structured data, exposure gate, interaction loop,
metrics, the `clonemem gym` command and its warehouse landing."""

from __future__ import annotations

import pytest

from clonemem import runtime
from clonemem.expectations.gym import ExposureGateFailed, exposure_gate, require_exposure
from clonemem.generation.execute import persona_specs, seed_pool
from clonemem.gym import stages as GS
from clonemem.gym.blueprint import GymDataError, build_blueprint, exposure_rate
from clonemem.offline import OfflineCall
from clonemem.offline.world import gym as world
from clonemem.schemas import gym as G
from clonemem.schemas.config import RunConfig
from clonemem.stages import offline_override

SMALL = {"name": "gymtest", "generation": {"personas": 2, "major_events": 2},
         "gym": {"periods": 4, "states_per_question": 2, "turns_per_exposure": 2, "questions": 4, "variables": 4}}


def _blueprints(cfg: RunConfig) -> list[G.Blueprint]:
    rt = runtime.Runtime(cfg)
    with runtime.use(rt):
        return [build_blueprint(lambda stage, inp, item: stage.run(rt.model(stage.role), inp), cfg, spec,
                                seed_pool(cfg), f"pid{spec.index}", f"p{spec.index + 1:02d}")
                for spec in persona_specs(cfg)]


def test_lexicon_value_phrases_are_unambiguous() -> None:
    phrases = [v for _, _, values in world.VARIABLES for v in values]
    assert len(set(phrases)) == len(phrases)
    for a in phrases:
        for b in phrases:
            assert a == b or not G.values_in(b, [a]), f"{a!r} is found inside {b!r}"


def test_blueprint_is_structured_grounded_and_deterministic() -> None:
    cfg = RunConfig.model_validate(SMALL)
    first, second = _blueprints(cfg), _blueprints(cfg)
    assert first == second  # offline: the same data every time
    for b in first:
        assert len(b.periods) == len(b.states) == 5  # N_p + 1 periods: sigma_0 .. sigma_Np
        assert len(b.state_schema.variables) == 4 and len(b.questions) == 4
        for q in b.questions:
            assert len(q.variables) == 2
            sizes = [len(b.state_schema.variable(n).values) for n in q.variables]
            assert len(q.choices) == sizes[0] * sizes[1]  # one choice per state combination
            for t in range(5):
                b.correct_choice(q, t)  # exactly one choice fits the states of every period
        changed = [sum(a.value != c.value for a, c in zip(b.states[t - 1].states, b.states[t].states, strict=True))
                   for t in range(1, 5)]
        assert all(n >= 1 for n in changed)  # each period's life event changes a state
        assert {o.period for o in b.openings} == set(range(5))
    assert first[0].state_schema != first[1].state_schema or first[0].states != first[1].states
    assert exposure_rate(first) == 1.0


def test_exposure_gate_passes_offline_and_fails_on_vague_openings() -> None:
    cfg = RunConfig.model_validate(SMALL)
    gate = exposure_gate(_blueprints(cfg), 0.95)
    assert gate.passed and gate.rate == 1.0 and gate.openings > 10
    require_exposure(gate)

    def vague(call: OfflineCall) -> G.Utterance:  # an opening that names no value
        assert isinstance(call.inputs, G.UtteranceInput)
        return G.Utterance(text=f"Things changed with my {call.inputs.exposed[0].label}, but never mind.")

    with offline_override(GS.UTTERANCE.name, vague):
        blueprints = _blueprints(cfg)
    gate = exposure_gate(blueprints, 0.95)
    assert not gate.passed and gate.rate == 0.0 and gate.failing[0].startswith("persona p01 P0U1: Things changed")
    with pytest.raises(ExposureGateFailed, match=r"gym gate failed: 0\.0% of \d+ openings .* below gym.min_exposure_rate 95%"):
        require_exposure(gate)


def test_a_state_outside_the_schema_is_refused_naming_persona_and_stage() -> None:
    cfg = RunConfig.model_validate(SMALL)

    def off_schema(call: OfflineCall) -> G.Evolution:
        out = world.evolution(call)
        first = out.periods[1]
        bad = [first.states[0].model_copy(update={"value": "on the moon"}), *first.states[1:]]
        return out.model_copy(update={"periods": [out.periods[0], first.model_copy(update={"states": bad}),
                                                  *out.periods[2:]]})

    with offline_override(GS.EVOLUTION.name, off_schema), pytest.raises(
            GymDataError, match=r"persona p01: stage gym.evolution: period 1: \w+='on the moon' is not one of its values"):
        _blueprints(cfg)
