"""One retrieval mode for a leaderboard (issue 30, item 2). A system built once over a persona's whole
history and asked "as of" each question must retrieve exactly what chronological replay gives it (the
past alone) before its figures may be called `replay` figures (``exact_as_of``); every registered system
that claims it is held to it here, on a history whose questions fall between traces of the same day.

On 810f4d0, bm25 built at once took its corpus statistics over the whole history (later traces changed
earlier questions' rankings) and disagreed with its replay on most questions of such a history; hybrid
and flat_combined, which score with it, too. Quick runs' question draws are checked here as well."""

from __future__ import annotations

import datetime as dt
import random

import numpy as np
import pytest

from clonemem import runtime
from clonemem.evaluation.replay import fed_by_replay, retrieval_mode
from clonemem.evaluation.run import EvalQuestion, PersonaData, Retrieval, build_and_retrieve
from clonemem.evaluation.sample import quick_run, shares
from clonemem.memory import SYSTEMS
from clonemem.memory.base import MemoryTrace, QuestionView
from clonemem.memory.flat import BM25
from clonemem.schemas.config import RunConfig
from clonemem.stages import STAGES
from clonemem.text import retrieval_tokens

WORDS = (
    "cat garden piano sister job move berlin coffee bike rain exam doctor novel friend trip beach salary "
    "loan wedding baby kitchen paint guitar market river mountain dog school office"
).split()
START = dt.datetime(2023, 1, 1)


def history(n_traces: int = 160, n_questions: int = 40, seed: int = 7) -> PersonaData:
    """Traces at random hours over a year (diary entries, dialogue turns, chats), growing vocabulary so
    later traces shift the corpus statistics, and questions at random hours too."""
    rng = random.Random(seed)
    traces = []
    for i in range(n_traces):
        when = START + dt.timedelta(minutes=rng.randrange(0, 365 * 24 * 60))
        words = [
            rng.choice(WORDS[: 6 + i * len(WORDS) // n_traces]) for _ in range(rng.randrange(4, 14))
        ]
        traces.append(
            MemoryTrace(
                f"t{i:03d}",
                rng.choice(["diary", "conversation_turn", "chat_private"]),
                when,
                "I " + " ".join(words) + ".",
            )
        )
    traces.sort(key=lambda t: (t.event_date, t.trace_id))
    questions = []
    for j in range(n_questions):
        when = START + dt.timedelta(minutes=rng.randrange(20 * 24 * 60, 365 * 24 * 60))
        past = [t for t in traces if t.event_date <= when]
        gold = tuple(t.trace_id for t in rng.sample(past, min(2, len(past))))
        questions.append(
            EvalQuestion(
                question_id=f"q{j:02d}",
                persona_id="p",
                question="What about my " + " ".join(rng.sample(WORDS, 3)) + "?",
                question_type=("fact", "change", "habit")[j % 3],
                dimension="d",
                question_time=when,
                answer="a",
                correct_choice_id=None,
                choices=(),
                evidence_sets=(gold,),
                statements=("s",),
            )
        )
    return PersonaData("p", "p", "P", "en", tuple(traces), tuple(questions), "p", {})


PERSONA = history()


def retrieve(system: str, replay: bool) -> Retrieval:
    with runtime.use(runtime.Runtime(RunConfig(), run_id="modes")):
        rt = runtime.current()
        return build_and_retrieve(
            system,
            PERSONA,
            10,
            lambda name, inp: STAGES.get(name).run(rt.model("extractor"), inp),
            3,
            lambda: (0, 0),
            replay=replay,
        )


EXACT = sorted(n for n in SYSTEMS.names() if getattr(SYSTEMS.get(n), "exact_as_of", False))
SLOW = {
    "dense",
    "hybrid",
    "flat_combined",
    "flat_wo_org",
}  # embed every unit (seconds each on this machine)


def test_the_raw_retrievers_and_references_claim_it() -> None:
    assert {"bm25", "bm25_boundary", "random", "oracle", "full_context"} <= set(EXACT)
    assert not getattr(SYSTEMS.get("mem0"), "exact_as_of", False)  # consolidates a day at once


@pytest.mark.parametrize("system", [s for s in EXACT if s not in SLOW])
def test_a_system_claiming_exact_as_of_retrieves_built_once_what_replay_gives_it(
    system: str,
) -> None:
    built, replayed = retrieve(system, replay=False), retrieve(system, replay=True)
    assert {q: r[:2] for q, r in built.results.items()} == {
        q: r[:2] for q, r in replayed.results.items()
    }


@pytest.mark.slow
@pytest.mark.parametrize("system", [s for s in EXACT if s in SLOW])
def test_the_embedding_systems_claiming_exact_as_of_too(system: str) -> None:
    built, replayed = retrieve(system, replay=False), retrieve(system, replay=True)
    assert {q: r[:2] for q, r in built.results.items()} == {
        q: r[:2] for q, r in replayed.results.items()
    }


def test_bm25_scores_as_bm25s_over_the_visible_traces() -> None:
    """The scoring is Lucene BM25 as bm25s computes it, over the units a question may see: the index
    over the whole history scores a question of mid-year exactly as bm25s over the first half only."""
    import bm25s

    from clonemem.memory.base import BuildContext

    system = BM25()
    system.build(PERSONA.traces, BuildContext(llm=lambda name, inp: inp))
    q = PERSONA.questions[0]
    upto = system.seen(QuestionView(q.question_id, q.question, q.question_time))
    assert 0 < upto < len(system.units)
    reference = bm25s.BM25()
    reference.index(
        [retrieval_tokens(f"{u.date_words}\n{u.indexed}") for u in system.units[:upto]],
        show_progress=False,
    )
    tokens = [w for w in retrieval_tokens(q.question) if w in reference.vocab_dict]
    ours = system.scores(q.question, upto)[:upto]
    assert np.allclose(ours, reference.get_scores(tokens), rtol=1e-5, atol=1e-6)


def test_the_mode_is_replay_where_the_figures_are_replay_figures() -> None:
    assert retrieval_mode(SYSTEMS.get("bm25"), replay=False) == "replay"
    assert retrieval_mode(SYSTEMS.get("mem0"), replay=False) == "in_process"
    assert retrieval_mode(SYSTEMS.get("mem0"), replay=True) == "replay"
    # with evaluation.replay, an exact system is still built once (the same figures, no re-indexing)
    assert not fed_by_replay(SYSTEMS.get("bm25"), replay=True) and fed_by_replay(
        SYSTEMS.get("mem0"), replay=True
    )


# -- quick runs ----------------------------------------------------------------------------------


def test_a_sample_is_stratified_by_type_seeded_and_recorded() -> None:
    asked, spec = quick_run([PERSONA], sample=9, seed=1)
    got = [q for p in asked for q in p.questions]
    assert (
        len(got) == 9
        and spec is not None
        and spec.model_dump() == {"kind": "sample", "n": 9, "seed": 1, "questions": 9, "of": 40}
    )
    assert sorted(q.question_type for q in got) == ["change"] * 3 + ["fact"] * 3 + ["habit"] * 3
    assert (
        asked[0].traces == PERSONA.traces
    )  # every trace stays: questions still see the whole past
    again, _ = quick_run([PERSONA], sample=9, seed=1)
    other, _ = quick_run([PERSONA], sample=9, seed=2)
    ids = lambda ps: [q.question_id for p in ps for q in p.questions]  # noqa: E731
    assert ids(again) == ids(asked) and ids(other) != ids(asked)
    assert spec.label() == "sample 9/40 seed 1"


def test_a_limit_takes_the_first_questions_and_shares_round_fairly() -> None:
    asked, spec = quick_run([PERSONA], limit=5)
    assert [q.question_id for q in asked[0].questions] == [f"q{j:02d}" for j in range(5)]
    assert spec is not None and spec.label() == "first 5/40"
    assert quick_run([PERSONA]) == ([PERSONA], None)
    assert shares({"a": 10, "b": 1, "c": 1}, 3) == {
        "a": 1,
        "b": 1,
        "c": 1,
    }  # every type while n allows
    assert shares({"a": 10, "b": 5}, 6) == {"a": 4, "b": 2}
    assert sum(shares({"a": 7, "b": 3, "c": 2}, 2).values()) == 2
    with pytest.raises(ValueError, match="--limit and --sample go apart"):
        quick_run([PERSONA], limit=1, sample=1)


def test_evaluate_json_names_how_each_system_was_fed(tmp_path) -> None:
    """The mode that decides what a leaderboard may rank together is in `evaluate --json` too (format 1.1),
    per system in its provenance, as it is stored."""
    import json

    from clonemem.demo import fixture_files
    from clonemem.importers import import_files
    from clonemem.warehouse import Warehouse
    from tests.shared_kit import cli

    wh = tmp_path / "wh.duckdb"
    with Warehouse.open_writer(wh) as writer:
        import_files(writer, "release", fixture_files()[:1], "demo")
    out = tmp_path / "result.json"
    got = cli(
        wh, "evaluate", "demo", "--systems", "bm25,mem0", "--k", "3", "--force", "--json", out
    )
    assert got.exit_code == 0, got.stderr[-2000:]
    doc = json.loads(out.read_text("utf-8"))
    assert doc["format_version"] == "1.1"
    fed = {s["system"]: s["retrieval_mode"] for s in doc["provenance"]["systems"]}
    assert fed == {"bm25": "replay", "mem0": "in_process"}
    with Warehouse.open_reader(wh) as r:
        stored = dict(r.rows("SELECT system, retrieval_mode FROM eval_system_stats"))
    assert stored == fed
