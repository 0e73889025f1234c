"""The gym (on-policy evaluation after AMemGym): its structured data, exposure gate, interaction loop,
metrics, the `clonemem gym` command and its warehouse landing."""

from __future__ import annotations

import re

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

SMALL = {
    "name": "gymtest",
    "generation": {"personas": 2, "major_events": 2},
    "gym": {
        "periods": 4,
        "states_per_question": 2,
        "turns_per_exposure": 2,
        "questions": 4,
        "variables": 4,
    },
}


def _blueprints(cfg: RunConfig) -> list[G.Blueprint]:
    rt = runtime.Runtime(cfg)
    with runtime.use(rt):
        return [
            build_blueprint(
                lambda stage, inp, item: stage.run(rt.model(stage.role), inp),
                cfg,
                spec,
                seed_pool(cfg),
                f"pid{spec.index}",
                f"p{spec.index + 1:02d}",
            )
            for spec in persona_specs(cfg)
        ]


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
        changed = [
            sum(
                a.value != c.value
                for a, c in zip(b.states[t - 1].states, b.states[t].states, strict=True)
            )
            for t in range(1, 5)
        ]
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
        return G.Utterance(
            text=f"Things changed with my {call.inputs.exposed[0].label}, but never mind."
        )

    with offline_override(GS.UTTERANCE.name, vague):
        blueprints = _blueprints(cfg)
    gate = exposure_gate(blueprints, 0.95)
    assert (
        not gate.passed
        and gate.rate == 0.0
        and gate.failing[0].startswith("persona p01 P0U1: Things changed")
    )
    with pytest.raises(
        ExposureGateFailed,
        match=r"gym gate failed: 0\.0% of \d+ openings .* below gym.min_exposure_rate 95%",
    ):
        require_exposure(gate)


def test_a_state_outside_the_schema_is_refused_naming_persona_and_stage() -> None:
    cfg = RunConfig.model_validate(SMALL)

    def off_schema(call: OfflineCall) -> G.Evolution:
        out = world.evolution(call)
        first = out.periods[1]
        bad = [first.states[0].model_copy(update={"value": "on the moon"}), *first.states[1:]]
        return out.model_copy(
            update={
                "periods": [
                    out.periods[0],
                    first.model_copy(update={"states": bad}),
                    *out.periods[2:],
                ]
            }
        )

    with (
        offline_override(GS.EVOLUTION.name, off_schema),
        pytest.raises(
            GymDataError,
            match=r"persona p01: stage gym.evolution: period 1: \w+='on the moon' is not one of its values",
        ),
    ):
        _blueprints(cfg)


# -- metrics ----------------------------------------------------------------------------------------------


def test_memory_score_bounds_and_ranks() -> None:
    from clonemem.gym.interact import Answered
    from clonemem.gym.metrics import memory_score, random_bound, ranks

    assert memory_score(0.55, 0.1, 1.0) == 0.5 and memory_score(0.1, 0.1, 1.0) == 0.0
    assert (
        memory_score(0.5, 0.5, 0.5) == 0.0
    )  # an upper bound that does not beat random normalizes nothing
    answers = [
        Answered(
            position=0,
            question_id="q",
            choice_id="A",
            correct_id="A",
            correct=True,
            options=n,
            diagnosis="correct",
        )
        for n in (4, 9)
    ]
    assert random_bound(answers) == pytest.approx((1 / 4 + 1 / 9) / 2)
    assert ranks({"a": 0.5, "b": 0.9, "c": 0.5}) == {"b": 1, "a": 2, "c": 2}


def test_diagnosis_tells_write_read_and_use_apart() -> None:
    import datetime as dt

    from clonemem.gym.interact import diagnose
    from clonemem.memory.base import Retrieved

    b = _blueprints(RunConfig.model_validate(SMALL))[0]
    q = b.questions[0]
    truth = b.state_at(4)
    labels = {v.name: v.label for v in b.state_schema.variables}
    now = [
        Retrieved(f"user: my {labels[v]} is {truth[v]}.", (f"t{i}",))
        for i, v in enumerate(q.variables)
    ]
    stale_value = {
        v: next(x for x in b.state_schema.variable(v).values if x != truth[v]) for v in q.variables
    }
    stale = [
        Retrieved(f"user: my {labels[v]} is {stale_value[v]}.", (f"s{i}",))
        for i, v in enumerate(q.variables)
    ]
    when = {
        **{f"s{i}": dt.datetime(2023, 1, 1) for i in range(3)},
        **{f"t{i}": dt.datetime(2023, 6, 1) for i in range(3)},
    }
    assert (
        diagnose(b, q, truth, now, now, when) == "use"
    )  # read the current states, answered wrong anyway
    assert diagnose(b, q, truth, stale, [*stale, *now], when) == "read"  # stored, not read
    assert diagnose(b, q, truth, stale, stale, when) == "write"  # never stored
    assert (
        diagnose(b, q, truth, stale, None, when) == "unknown"
    )  # the memory cannot list what it holds
    later = {**when, **{f"s{i}": dt.datetime(2023, 9, 1) for i in range(3)}}
    assert (
        diagnose(b, q, truth, [*now, *stale], [*now, *stale], later) == "write"
    )  # a later stale mention wins


# -- the command, end to end (offline, a Prefect server of its own) --------------------------------------

from pathlib import Path  # noqa: E402

from typer.testing import CliRunner  # noqa: E402

from clonemem.cli import app  # noqa: E402

BASE = Path(__file__).parent.parent / "configs" / "gym-base.toml"


def _cli(*args: str):  # type: ignore[no-untyped-def]  # typer's Result
    return CliRunner().invoke(app, list(args))


def test_unknown_system_is_refused_in_one_line_before_any_work(tmp_path: Path) -> None:
    got = _cli(
        "--warehouse",
        str(tmp_path / "w.duckdb"),
        "gym",
        "--config",
        str(BASE),
        "--systems",
        "bm25,nosuch",
    )
    assert got.exit_code == 1
    assert (
        got.output.strip().splitlines() == [got.output.strip().splitlines()[0]]
        and "unknown system 'nosuch' for the gym" in got.output
    )
    assert not (tmp_path / "w.duckdb").exists()


def test_gym_runs_the_base_preset_offline_end_to_end(tmp_path: Path) -> None:
    import json

    from clonemem.warehouse import Warehouse

    wh, out = tmp_path / "w.duckdb", tmp_path / "gym.json"
    got = _cli(
        "--warehouse",
        str(wh),
        "gym",
        "--config",
        str(BASE),
        "--systems",
        "bm25,no_memory",
        "--json",
        str(out),
    )
    assert got.exit_code == 0, got.output
    for shown in (
        "2 persona(s), N_p=10, N_s=2, N_i=4; exposure 100.0% of",
        "accuracy by evaluation position",
        "memory score by evaluation position",
        "misses by cause",
        "on- vs off-policy",
        "upper bound",
    ):
        assert shown in got.output
    report = json.loads(out.read_text())
    assert set(report) == {"format_version", "results", "bounds", "rank_change", "exposure_rate"}
    assert [set(r) for r in report["results"]] == [
        {"system", "accuracy", "accuracy_ci", "memory_score", "accuracy_by_position"}
    ] * 2
    assert set(report["bounds"]) == {"random", "upper"} and report["exposure_rate"] == 1.0
    assert [set(r) for r in report["rank_change"]] == [
        {"system", "on_policy_rank", "off_policy_rank"}
    ] * 2
    by = {r["system"]: r for r in report["results"]}
    assert all(len(r["accuracy_by_position"]) == 11 for r in report["results"])  # N_p + 1 positions
    bounds = report["bounds"]
    assert (
        bounds["random"] < by["no_memory"]["accuracy_ci"][1]
        and by["no_memory"]["accuracy_ci"][1] < by["bm25"]["accuracy_ci"][0]
    )
    assert by["bm25"]["accuracy_ci"][1] < bounds["upper"]
    with Warehouse.open_reader(wh) as w:
        assert w.rows("SELECT kind, status FROM runs") == [("gym", "completed")]
        assert (
            w.scalar("SELECT count(*) FROM llm_calls WHERE run_id NOT IN (SELECT run_id FROM runs)")
            == 0
        )
        assert (
            w.scalar(
                "SELECT count(*) FROM llm_calls WHERE role = 'user_sim' AND stage = 'gym.user_turn'"
            )
            > 0
        )
        # 2 personas × 11 positions × 10 questions, per system and policy; the upper bound's assistant too
        assert w.rows(
            "SELECT system, policy, count(*) FROM gym_answers GROUP BY ALL ORDER BY ALL"
        ) == [
            ("bm25", "off", 220),
            ("bm25", "on", 220),
            ("no_memory", "off", 220),
            ("no_memory", "on", 220),
            ("oracle_states", "on", 220),
        ]
        assert w.scalar("SELECT count(DISTINCT persona_id) FROM gym_states") == 2
        assert (
            w.scalar(
                "SELECT value FROM gym_metrics WHERE system = 'bm25' AND policy = 'on' AND metric = 'accuracy' "
                "AND position IS NULL"
            )
            == by["bm25"]["accuracy"]
        )
        calls = w.scalar("SELECT count(*) FROM llm_calls")
    again = _cli(
        "--warehouse",
        str(wh),
        "gym",
        "--config",
        str(BASE),
        "--systems",
        "bm25,no_memory",
        "--json",
        str(out),
    )
    assert again.exit_code == 0, again.output
    assert json.loads(out.read_text()) == report  # offline: the same numbers
    with Warehouse.open_reader(wh) as w:
        assert (
            w.scalar("SELECT count(*) FROM llm_calls") == calls
        )  # every step and interaction from the cache
        assert w.scalar("SELECT count(*) FROM gym_runs") == 2


def test_openings_that_hide_their_states_fail_the_gate_with_exit_3(tmp_path: Path) -> None:
    from clonemem.warehouse import Warehouse

    def vague(call: OfflineCall) -> G.Utterance:
        return G.Utterance(text="A lot has changed lately, but let's not get into it.")

    wh, cfg = tmp_path / "w.duckdb", tmp_path / "gym.toml"
    # another seed: steps cached by other tests (an override does not change a step's key) are not reused
    cfg.write_text(BASE.read_text().replace("seed = 42", "seed = 4242"))
    with offline_override(GS.UTTERANCE.name, vague):
        got = _cli("--warehouse", str(wh), "gym", "--config", str(cfg), "--systems", "bm25")
    assert got.exit_code == 3, got.output
    assert (
        "gym gate failed: 0.0% of 26 openings expose the states they were written for" in got.output
    )
    with Warehouse.open_reader(wh) as w:
        assert w.scalar("SELECT count(*) FROM gym_runs") == 0
        assert w.rows("SELECT kind, status FROM runs") == [("gym", "failed")]


# the dry run's flow runs outside the command's early server: on the process's one server (conftest)
@pytest.mark.prefect
def test_estimate_prices_the_user_simulator(tmp_path: Path) -> None:
    # the dry run is the whole gym flow: a smaller gym than the base preset prices the same stages
    cfg = tmp_path / "gym.toml"
    small = BASE.read_text()
    for setting, value in (
        ("personas", 1),
        ("periods", 2),
        ("questions", 2),
        ("turns_per_exposure", 1),
    ):
        assert len(re.findall(rf"^{setting} = \d+", small, re.M)) == 1, setting
        small = re.sub(rf"^{setting} = \d+", f"{setting} = {value}", small, flags=re.M)
    cfg.write_text(small)
    got = _cli(
        "--warehouse",
        str(tmp_path / "w.duckdb"),
        "gym",
        "--config",
        str(cfg),
        "--systems",
        "bm25",
        "--estimate",
    )
    assert got.exit_code == 0, got.output
    line = next(x for x in got.output.splitlines() if x.startswith("gym.user_turn"))
    assert line.split()[1:3] == ["user_sim", "offline/user"] and int(line.split()[3]) > 0
    assert not (tmp_path / "w.duckdb").exists()  # a dry run writes nothing of the user's


# -- the interaction in process ----------------------------------------------------------------------------


def _interact(cfg: RunConfig, blueprint: G.Blueprint, system: str, transcript=None):  # type: ignore[no-untyped-def]  # an Interaction
    from clonemem.gym.run import run_one
    from clonemem.stages import STAGES

    rt = runtime.Runtime(cfg)
    with runtime.use(rt):
        return run_one(
            system,
            blueprint,
            lambda stage, inp: stage.run(rt.model(stage.role), inp),
            lambda name, inp: STAGES.get(name).run(rt.model("extractor"), inp),
            cfg.gym,
            cfg.seed,
            cfg.evaluation.full_context_tokens,
            transcript,
        )


def test_the_memory_ingests_each_exchange_as_it_happens_and_is_asked_after_each_period() -> None:
    import datetime as dt

    from clonemem.memory import SYSTEMS
    from clonemem.memory.flat import BM25

    fed: list[list[tuple[str, dt.datetime]]] = []
    asked: list[tuple[str, int]] = []

    class Recording(BM25):
        name = "recording"

        def ingest(self, traces, ctx) -> None:  # type: ignore[no-untyped-def]  # the base signature
            fed.append([(t.content.split(":")[0], t.event_date) for t in traces])
            super().ingest(traces, ctx)

        def retrieve(self, question, k):  # type: ignore[no-untyped-def]  # the base signature
            asked.append((question.question_id, len(fed)))
            return super().retrieve(question, k)

    cfg = RunConfig.model_validate(SMALL)
    b = _blueprints(cfg)[0]
    with SYSTEMS.added("recording", Recording):
        got = _interact(cfg, b, "recording")
    assert all(
        [who for who, _ in exchange] == ["user", "assistant"] for exchange in fed
    )  # one exchange at a time
    times = [at for exchange in fed for _, at in exchange]
    assert times == sorted(times) and len(fed) == len(got.turns) // 2
    assert len(fed) == len(b.openings) * (cfg.gym.turns_per_exposure + 1)
    # questions are asked at each of the N_p + 1 positions, each time after that period's exchanges only
    per_position = [
        sum(1 for o in b.openings if o.period <= t) * (cfg.gym.turns_per_exposure + 1)
        for t in range(5)
    ]
    question_asks = [n for qid, n in asked if "@" in qid]
    assert question_asks == [n for n in per_position for _ in b.questions]
    assert [a.position for a in got.answers] == [t for t in range(5) for _ in b.questions]


def test_what_the_assistant_says_shapes_what_the_user_says_next() -> None:
    cfg = RunConfig.model_validate(SMALL)
    b = _blueprints(cfg)[0]
    forgetful, knowing = _interact(cfg, b, "no_memory"), _interact(cfg, b, "oracle_states")

    def reminders(run) -> int:  # type: ignore[no-untyped-def]  # an Interaction
        return sum("remind me" in t.text for t in run.turns if t.speaker == "assistant")

    assert reminders(forgetful) > reminders(knowing)
    said = [t for t in forgetful.turns if t.speaker == "user"]
    asked = [
        i
        for i, t in enumerate(forgetful.turns)
        if t.speaker == "assistant" and "remind me" in t.text
    ]
    # asked to remind, the simulated user restates a current state (the next user turn of the same session)
    nxt = [
        forgetful.turns[i + 1]
        for i in asked
        if i + 1 < len(forgetful.turns)
        and forgetful.turns[i + 1].session == forgetful.turns[i].session
        and forgetful.turns[i + 1].turn > 0
    ]
    assert nxt and all(t.text.startswith("Sure. My ") for t in nxt)
    assert all(G.values_in(t.text, [s.value for s in b.states[t.period].states]) for t in nxt)
    assert len(said) == len(forgetful.turns) // 2
    # off-policy: the memory is fed the reference's transcript, nobody talks to it
    replayed = _interact(cfg, b, "no_memory", knowing.turns)
    assert replayed.policy == "off" and replayed.turns == knowing.turns


def test_a_live_models_choice_is_read_with_its_punctuation() -> None:
    cfg = RunConfig.model_validate(SMALL)
    b = _blueprints(cfg)[0]

    def sloppy(call: OfflineCall) -> G.GymAnswer:
        choice = world.answer(call)
        return G.GymAnswer(choice_id=f" {choice.choice_id.lower()}.", reason="")

    exact = _interact(cfg, b, "oracle_states")
    with offline_override(GS.ANSWER.name, sloppy):
        got = _interact(cfg, b, "oracle_states")
    assert [a.correct for a in got.answers] == [a.correct for a in exact.answers] and all(
        a.correct for a in got.answers
    )


def test_a_failing_memory_system_is_exit_5_naming_it_and_nothing_of_the_gym_is_stored(
    tmp_path: Path,
) -> None:
    from clonemem.memory import SYSTEMS
    from clonemem.memory.flat import BM25
    from clonemem.warehouse import Warehouse

    class Broken(BM25):
        name = "broken_gym"

        def ingest(self, traces, ctx) -> None:  # type: ignore[no-untyped-def]  # the base signature
            if len(getattr(self, "_ingested", ())) >= 6:  # after three exchanges
                raise ValueError("index full")
            super().ingest(traces, ctx)

    wh, cfg = tmp_path / "w.duckdb", tmp_path / "gym.toml"
    cfg.write_text(BASE.read_text().replace("personas = 2", "personas = 1"))
    with SYSTEMS.added("broken_gym", Broken):
        got = _cli(
            "--warehouse", str(wh), "gym", "--config", str(cfg), "--systems", "bm25,broken_gym"
        )
    assert got.exit_code == 5, got.output
    assert "memory system 'broken_gym': ingest failed: ValueError: index full" in got.output
    with Warehouse.open_reader(wh) as w:
        assert (
            w.scalar("SELECT count(*) FROM gym_runs") == 0
            and w.scalar("SELECT count(*) FROM gym_answers") == 0
        )
        assert w.rows("SELECT kind, status FROM runs") == [("gym", "failed")]
