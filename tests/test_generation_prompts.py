"""Every generation stage through the real provider SDKs (anthropic, google-genai, openai).

One small offline persona run supplies, for each of the stages registered in
``clonemem.generation.stages.STAGES``, a realistic input and the output the offline world gave for
it. Each stage is then run against the loopback servers of ``tests/fakeapi.py``, which reply with
that output as the model's text. The tests show that the stage's template renders, that the
rendered prompt (system, user and the JSON-schema instruction) is what reaches the wire in each
vendor's format, with the stage's facts in it, and that the reply parses back into the stage's
output schema, also after a malformed first reply.
"""

from __future__ import annotations

import contextlib
import json
from collections import defaultdict
from collections.abc import Callable, Iterator
from concurrent.futures import Future

import pytest
from pydantic import BaseModel

from clonemem.generation.dag import PersonaDag
from clonemem.generation.execute import drive, new_dags
from clonemem.generation.stages import STAGES, Stage
from clonemem.llm.model import MemorySink, Model, get_model
from clonemem.runtime import Runtime
from clonemem.schemas.config import RunConfig
from tests.fakeapi import FakeAPIServer, Seen

FLAVORS = ["anthropic", "gemini", "openai"]
STAGE_NAMES = [
    n for n in STAGES.names() if n.startswith("generation.")
]  # the registry also holds QA, eval, memory
KEY_ENV = "CLONEMEM_TEST_KEY"
SECRET = "sk-test-prompts-2c8e4a6b0d1f"
MODEL = "test-model"
JSON_INSTRUCTION = (
    "Reply with a single JSON object that validates against this JSON schema, and nothing else:"
)

SMALL = {
    "generation": {
        "major_events": 2,
        "phases_per_event": 2,
        "events_per_phase": 2,
        "traces_per_event": 2,
        "noise_traces_per_phase": 1,
    }
}

Sample = tuple[BaseModel, BaseModel]  # (stage input, the offline output for it)

# Where a later call of a stage renders more of its template than the first, take that one:
# a phase with a previous phase, a trace that carries evidence (not a noise trace).
PREFER: dict[str, Callable[[BaseModel], bool]] = {
    "generation.phase": lambda inp: inp.previous_phase is not None,  # type: ignore[attr-defined]
    "generation.trace_content": lambda inp: bool(inp.plan.key_information),  # type: ignore[attr-defined]
}


# -- realistic inputs and replies, once per module ------------------------------------------------


@pytest.fixture(scope="module")
def samples() -> dict[str, Sample]:
    """Drive one offline persona through the real DAG, recording every stage's (input, output)."""
    config = RunConfig.model_validate(SMALL)
    runtime = Runtime(config)
    runs: dict[str, list[Sample]] = defaultdict(list)

    def start(stage: Stage, inp: BaseModel, item: str) -> Future:
        fut: Future = Future()
        try:
            out = stage.run(runtime.model(stage.role), inp)
        except Exception as exc:  # handed to the DAG like any executor would
            fut.set_exception(exc)
        else:
            runs[stage.name].append((inp, out))
            fut.set_result(out)
        return fut

    dags = new_dags(config)
    finished: list[PersonaDag] = []
    drive(dags, start, finished.append)
    assert finished == dags and not dags[0].failures, dags[0].failures

    chosen = {}
    for name, pairs in runs.items():
        prefer = PREFER.get(name)
        picked = [p for p in pairs if prefer is None or prefer(p[0])]
        assert picked, f"no {name} call of the preferred kind in the offline run"
        chosen[name] = picked[0]
    return chosen


# -- the loopback servers, one per flavour for the module (shutting one down takes ~0.5 s) -------


@pytest.fixture(scope="module")
def servers() -> Iterator[dict[str, FakeAPIServer]]:
    with contextlib.ExitStack() as stack:
        yield {f: stack.enter_context(FakeAPIServer(f)) for f in FLAVORS}


@pytest.fixture
def server(servers: dict[str, FakeAPIServer], flavor: str) -> Iterator[FakeAPIServer]:
    srv = servers[flavor]
    srv.script.clear()
    srv.seen.clear()
    yield srv
    left = len(srv.script)
    srv.script.clear()
    assert left == 0, f"{left} scripted replies were never requested"


@pytest.fixture(autouse=True)
def api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, SECRET)


def model_for(server: FakeAPIServer, sink: MemorySink | None = None) -> Model:
    flavor = server.flavor.name
    config = RunConfig.model_validate(
        {
            "models": {"generator": f"{flavor}/{MODEL}"},
            "providers": {
                flavor: {
                    "base_url": server.base_url,
                    "api_key_env": KEY_ENV,
                    "max_retries": 0,
                    "max_validation_retries": 2,
                    "timeout_s": 10,
                }
            },
        }
    )
    model = get_model(config, "generator", sink=sink, sleep=lambda s: None)
    assert model.ref == f"{flavor}/{MODEL}" and not model.is_offline
    return model


# -- reading a request in each wire format ----------------------------------------------------------


def wire(flavor: str, seen: Seen) -> tuple[str, list[tuple[str, str]]]:
    """The system prompt and the (role, text) conversation of one request, whatever the vendor."""
    body = seen.body
    if flavor == "anthropic":
        assert seen.path == "/v1/messages" and body["model"] == MODEL
        return body["system"], [(m["role"], m["content"]) for m in body["messages"]]
    if flavor == "openai":
        assert seen.path == "/v1/chat/completions" and body["model"] == MODEL
        first, *rest = body["messages"]
        assert first["role"] == "system"
        return first["content"], [(m["role"], m["content"]) for m in rest]
    assert seen.path.endswith(f"/models/{MODEL}:generateContent")
    system_parts = body["systemInstruction"]["parts"]
    assert len(system_parts) == 1
    turns = []
    for content in body["contents"]:
        assert len(content["parts"]) == 1
        turns.append(
            (
                {"model": "assistant"}.get(content["role"], content["role"]),
                content["parts"][0]["text"],
            )
        )
    return system_parts[0]["text"], turns


def wire_schema(flavor: str, seen: Seen) -> dict:
    """The native structured-output schema the request carried."""
    body = seen.body
    if flavor == "anthropic":
        fmt = body["output_config"]["format"]
        assert fmt["type"] == "json_schema"
        return fmt["schema"]
    if flavor == "openai":
        fmt = body["response_format"]
        assert fmt["type"] == "json_schema"
        return fmt["json_schema"]["schema"]
    cfg = body["generationConfig"]
    assert cfg["responseMimeType"] == "application/json"
    return cfg["responseJsonSchema"]


def secret_reached(flavor: str, seen: Seen) -> bool:
    h = seen.headers
    return (
        SECRET
        in {
            "anthropic": h.get("x-api-key", "") + h.get("authorization", ""),
            "openai": h.get("authorization", ""),
            "gemini": h.get("x-goog-api-key", ""),
        }[flavor]
    )


# -- what each stage's prompt must say about its input -----------------------------------------------


def _media(mix: dict[str, float]) -> list[str]:
    return [f"{m} {w}" for m, w in mix.items()]


FACTS: dict[str, Callable[[BaseModel], list[str]]] = {
    "generation.persona": lambda i: [
        *(f"- {t}: {v:.2f}" for t, v in i.big_five),
        str(i.timeline_start),
        str(i.timeline_end),
        f"life before {i.timeline_start.year}",
    ],
    "generation.relations": lambda i: [
        i.profile.name,
        i.profile.employer,
        i.profile.city,
        *i.profile.family,
    ],
    "generation.seeds": lambda i: [
        i.profile.name,
        i.profile.occupation,
        *(f"- {s.concept}: {s.label} ({s.description})" for s in i.pool),
        f"at most {i.max_from_pool} concepts",
        f"at most {i.max_added} persona-specific",
    ],
    "generation.arcs": lambda i: [
        i.profile.name,
        *(f"{r.name} ({r.role})" for r in i.relations),
        *(s.label for s in i.seeds),
        f"Create {i.arcs_per_dimension} life arc(s)",
    ],
    "generation.privacy": lambda i: [
        i.profile.name,
        *(f"{r.name} ({r.relation_type}, {r.role})" for r in i.relations),
        *(f"{a.key} [{a.dimension}, {a.theme}] {a.title}" for a in i.arcs),
    ],
    "generation.major_events": lambda i: [
        f"Person: {i.profile.name}, {i.profile.age}, {i.profile.occupation} in {i.profile.city}.",
        f"Timeline: {i.timeline_start} to {i.timeline_end}.",
        *(a.title for a in i.arcs),
        *(s.state for a in i.arcs for s in a.anchor_states),
        f"exactly {i.count} major events",
    ],
    "generation.initial_snapshot": lambda i: [
        i.persona.name,
        i.first_event.title,
        str(i.first_event.date),
        i.first_event.description,
        *(f"- {a.key} [{a.dimension}] {a.title}: {a.current_state}" for a in i.arcs),
    ],
    "generation.phase": lambda i: [
        i.persona.name,
        i.event.title,
        i.event.description,
        f"Major event {i.event_index + 1}:",
        *(f"{r.name} ({r.role})" for r in i.relations),
        *(a.current_state for a in i.arcs),
        i.snapshot.model_dump_json(),
        f"Previous phase: {i.previous_phase.title}",
        f"phase {i.phase_index + 1} of {i.phase_count}, from {i.start_date} to {i.end_date}",
    ],
    "generation.snapshot_update": lambda i: [
        f"Person: {i.persona.name}",
        i.snapshot.model_dump_json(),
        i.phase.model_dump_json(),
        *(f"{a.key} = {a.title}" for a in i.arcs),
    ],
    "generation.detailed_events": lambda i: [
        i.persona.name,
        f"Major event: {i.event_title}",
        i.phase.title,
        i.phase.description,
        f"Phase {i.phase_index + 1}/{i.phase_count} ({i.phase.start_date} to {i.phase.end_date}, tone {i.phase.tone})",
        i.snapshot_before.model_dump_json(),
        i.snapshot_after.model_dump_json(),
        f"Write {i.count} detailed events",
        f"{i.evidence_per_event} evidence items",
    ],
    "generation.trace_plans": lambda i: [
        f"Person: {i.persona.name}",
        i.event.title,
        i.event.place,
        *i.event.people,
        *(f"{n}: [{e.kind}] {e.statement}" for n, e in enumerate(i.event.evidence)),
        *_media(i.media_mix),
        f"Plan {i.count} traces",
        *(f"- {b.key} [{b.category}] {b.subject}" for b in i.boundaries),
    ],
    "generation.noise_plans": lambda i: [
        i.persona.name,
        i.persona.city,
        *(r.name for r in i.relations),
        f"Period: {i.phase.start_date} to {i.phase.end_date} ({i.phase.title}).",
        *_media(i.media_mix),
        f"Plan {i.count} such traces",
    ],
    "generation.trace_content": lambda i: [
        f"You are {i.persona.name}.",
        f"Write this {i.plan.medium} ({i.plan.timestamp}).",
        f"Intent: {i.plan.intent}. Audience: {i.plan.audience}.",
        *(f"- {k}" for k in i.plan.key_information),
        f"Context: {i.event_title}: {i.event_description} (at {i.place}",
        *i.people,
        f"Your mood: {i.mood.dominant_emotion}, energy {i.mood.energy}/10, stress {i.mood.stress}/10.",
    ],
}


def check_rendered(name: str, inp: BaseModel, system: str, template_user: str) -> None:
    text = system + "\n" + template_user
    for leftover in ("{{", "}}", "{%", "%}", "{#", "#}"):
        assert leftover not in text, f"{name}: Jinja leftover {leftover!r}"
    assert "None" not in text, f"{name}: a missing value was rendered as None"
    assert "English" in system, f"{name}: the language is not named in the system prompt"
    missing = [fact for fact in FACTS[name](inp) if fact not in text]
    assert not missing, f"{name}: prompt lacks {missing}"


# -- tests -----------------------------------------------------------------------------------------


def test_offline_run_feeds_every_stage(samples: dict[str, Sample]) -> None:
    """Coverage, not a count: every registered generation stage was reached by the offline run and
    has its prompt facts listed, so a new stage without either fails here."""
    assert STAGE_NAMES, "no generation stage is registered"
    assert sorted(samples) == STAGE_NAMES, (
        f"stages the offline run never reached: {set(STAGE_NAMES) - set(samples)}"
    )
    assert sorted(FACTS) == STAGE_NAMES, (
        f"stages without prompt facts: {set(STAGE_NAMES) ^ set(FACTS)}"
    )
    for name, (inp, out) in samples.items():
        stage = STAGES.get(name)
        assert isinstance(inp, stage.inputs) and isinstance(out, stage.output)
        assert (
            stage.output.model_validate_json(out.model_dump_json()) == out
        )  # the canned reply round-trips


@pytest.mark.parametrize("name", STAGE_NAMES)
def test_template_renders_the_stage_input(name: str, samples: dict[str, Sample]) -> None:
    stage = STAGES.get(name)
    inp, _ = samples[name]
    prompt = stage.render(inp)
    assert prompt.name == stage.template and prompt.system and prompt.user
    check_rendered(name, inp, prompt.system, prompt.user)


@pytest.mark.parametrize("flavor", FLAVORS)
@pytest.mark.parametrize("name", STAGE_NAMES)
def test_stage_through_provider(
    name: str, flavor: str, server: FakeAPIServer, samples: dict[str, Sample]
) -> None:
    stage = STAGES.get(name)
    inp, canned = samples[name]
    server.push(server.flavor.ok(canned.model_dump_json(), MODEL))
    sink = MemorySink()
    model = model_for(server, sink)

    result = stage.run(model, inp)

    assert type(result) is stage.output and result == canned
    assert len(server.seen) == 1 and model.usage.calls == 1 and model.usage.attempts == 1
    [rec] = sink.records
    assert (rec.stage, rec.role, rec.provider, rec.model, rec.outcome) == (
        name,
        "generator",
        flavor,
        MODEL,
        "ok",
    )
    assert (rec.input_tokens, rec.output_tokens) == (31, 9)

    seen = server.seen[0]
    assert secret_reached(flavor, seen)
    prompt = stage.render(inp)
    system, turns = wire(flavor, seen)
    assert system == prompt.system
    assert [role for role, _ in turns] == ["user"]
    user = turns[0][1]
    assert user.startswith(prompt.user + "\n\n"), (
        "the rendered user prompt did not reach the wire intact"
    )
    instruction = user[len(prompt.user) :]
    assert JSON_INSTRUCTION in instruction
    assert json.dumps(stage.output.model_json_schema()) in instruction
    check_rendered(name, inp, system, prompt.user)

    # the native structured-output schema is the stage's output schema (vendors may reshape it)
    schema = wire_schema(flavor, seen)
    assert schema.get("type") == "object"
    assert set(schema["properties"]) == set(stage.output.model_fields)
    if (
        flavor != "anthropic"
    ):  # anthropic.transform_schema rewrites constraints; the others send it as is
        assert schema == stage.output.model_json_schema()


BAD_REPLIES: dict[str, Callable[[str], str]] = {
    "truncated": lambda good: good[: len(good) // 2],
    "schema": lambda good: json.dumps({**json.loads(good), "tone": "ecstatic"}),
}
PROBLEM = {"truncated": "not valid JSON", "schema": "tone"}


@pytest.mark.parametrize("bad", sorted(BAD_REPLIES))
@pytest.mark.parametrize("flavor", FLAVORS)
def test_malformed_reply_is_fed_back(
    bad: str, flavor: str, server: FakeAPIServer, samples: dict[str, Sample]
) -> None:
    stage = STAGES.get("generation.phase")
    inp, canned = samples[stage.name]
    good = canned.model_dump_json()
    broken = BAD_REPLIES[bad](good)
    server.push(server.flavor.ok(broken, MODEL), server.flavor.ok(good, MODEL))
    sink = MemorySink()
    model = model_for(server, sink)

    assert stage.run(model, inp) == canned

    assert len(server.seen) == 2 and model.usage.attempts == 2 and model.usage.calls == 1
    [rec] = sink.records
    assert rec.outcome == "ok" and rec.attempts == 2 and rec.error is None
    system1, first = wire(flavor, server.seen[0])
    system2, second = wire(flavor, server.seen[1])
    assert system2 == system1 == stage.render(inp).system
    assert [role for role, _ in second] == ["user", "assistant", "user"]
    assert second[0] == first[0]  # the original prompt is kept
    assert second[1][1] == broken  # the bad reply is shown back to the model
    feedback = second[2][1]
    assert "Your previous reply could not be used" in feedback and PROBLEM[bad] in feedback
    assert wire_schema(flavor, server.seen[1]) == wire_schema(flavor, server.seen[0])


@pytest.mark.parametrize("flavor", FLAVORS)
def test_fenced_reply_parses_first_time(
    flavor: str, server: FakeAPIServer, samples: dict[str, Sample]
) -> None:
    """Models often wrap JSON in a Markdown fence; that is accepted without a retry."""
    stage = STAGES.get("generation.trace_content")
    inp, canned = samples[stage.name]
    server.push(server.flavor.ok(f"```json\n{canned.model_dump_json(indent=2)}\n```", MODEL))
    model = model_for(server)
    assert stage.run(model, inp) == canned
    assert len(server.seen) == 1 and model.usage.attempts == 1


@pytest.mark.parametrize(
    "name",
    [
        "generation.major_events",
        "generation.initial_snapshot",
        "generation.phase",
        "generation.detailed_events",
    ],
)
def test_arc_list_has_one_line_per_arc(name: str, samples: dict[str, Sample]) -> None:
    inp, _ = samples[name]
    lines = STAGES.get(name).render(inp).user.splitlines()
    arcs = inp.arcs  # type: ignore[attr-defined]
    assert len(arcs) >= 3
    for arc in arcs:
        starts = [
            line for line in lines if line.startswith(f"- {arc.key} [{arc.dimension}] {arc.title}")
        ]
        assert len(starts) == 1, f"{name}: arc {arc.key} does not start its own line"
        assert starts[0].count(" [") == 1, (
            f"{name}: another arc runs on after {arc.key}: {starts[0]!r}"
        )
