"""The recipes of docs/architecture.md, followed: a memory system is one module plus one registry line,
an expectation is one entry in the checks; each is then run by the pipeline's own flows."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from clonemem.importers import import_files
from clonemem.memory import SYSTEMS
from clonemem.schemas.config import RunConfig
from clonemem.warehouse import Warehouse

pytestmark = pytest.mark.prefect

NEWEST = '''
from clonemem.memory.base import MemorySystem, Retrieved
from clonemem.memory.memsys_stages import SUMMARIZE_TRACE


class Newest(MemorySystem):
    """The k newest visible traces, each with its extracted summary (one declared LLM stage)."""

    name = "newest"
    llm_stages = (SUMMARIZE_TRACE,)

    def build(self, traces, ctx):
        from clonemem.schemas.memory import TraceText

        self.items = []
        for t in sorted(traces, key=lambda t: (t.event_date, t.trace_id)):
            out = ctx.llm(SUMMARIZE_TRACE.name, TraceText(trace_id=t.trace_id, medium=t.medium,
                                                          event_date=t.event_date.isoformat(), content=t.content))
            self.items.append((t, out.summary))
        ctx.stats["items"] = len(self.items)

    def retrieve(self, question, k):
        seen = [(t, s) for t, s in self.items if t.event_date <= question.question_time]
        return [Retrieved(s, (t.trace_id,), kind="summary") for t, s in reversed(seen[-k:])]


class Sneaky(Newest):
    """Calls a stage it does not declare."""

    name = "sneaky"
    llm_stages = ()
'''


@pytest.fixture
def imported(tmp_path: Path, demo_file: Path) -> Path:
    path = tmp_path / "wh.duckdb"
    with Warehouse.open_writer(path) as wh:
        import_files(wh, "release", [demo_file], "imported")
    return path


@pytest.fixture
def toy_module(tmp_path: Path):
    (tmp_path / "toy_newest.py").write_text(textwrap.dedent(NEWEST), "utf-8")
    sys.path.insert(0, str(tmp_path))
    try:
        yield "toy_newest"
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("toy_newest", None)
        for name in ("newest", "sneaky"):
            SYSTEMS.remove(name, missing_ok=True)


def test_add_a_memory_system_recipe(imported: Path, toy_module: str) -> None:
    from clonemem.flows.evaluation import evaluate_flow

    SYSTEMS.add_lazy("newest", f"{toy_module}:Newest")  # the one registry line
    assert "newest" in SYSTEMS.names()
    got = evaluate_flow(
        str(imported), "imported", ["newest", "random"], [3], force=True, config=RunConfig()
    )
    newest = got.scores("newest", 3)
    assert newest.n_questions == 6 and newest.recall_flat is not None
    assert (
        newest.llm_calls == 16
    )  # its declared stage ran once per trace, through the extractor's model
    with Warehouse.open_reader(imported) as wh:
        stages = wh.rows("SELECT DISTINCT stage FROM llm_calls WHERE stage LIKE 'memory.%'")
    assert stages == [("memory.summarize_trace",)]  # its calls are in the ledger


def test_a_system_may_call_only_the_stages_it_declares(imported: Path, toy_module: str) -> None:
    from clonemem.flows.evaluation import evaluate_flow

    SYSTEMS.add_lazy("sneaky", f"{toy_module}:Sneaky")
    with pytest.raises(RuntimeError, match="does not declare in llm_stages"):
        evaluate_flow(str(imported), "imported", ["sneaky"], [3], force=True, config=RunConfig())


def test_add_an_expectation_recipe(imported: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from clonemem.expectations import checks, gate

    def at_most_ten_questions(params: dict):
        import great_expectations as gx

        return gx.expectations.ExpectTableRowCountToBeBetween(min_value=1, max_value=10)

    toy = checks.Check(
        "toy_suite", "at most ten questions per benchmark", checks.QUESTIONS, at_most_ten_questions
    )
    monkeypatch.setattr(gate, "CHECKS", (*checks.CHECKS, toy))  # the one entry
    result = gate.run_gate(imported, "imported", docs_dir=imported.parent / "docs")
    assert result.status == "passed"
    with Warehouse.open_reader(imported) as wh:
        stored = wh.rows("SELECT success, observed FROM gate_results WHERE suite = 'toy_suite'")
    assert stored and stored[0][0] is True and "6" in stored[0][1]  # six questions observed


def test_registries_check_what_is_registered() -> None:
    """A wrong object fails where it is registered, naming the registry and the entry."""
    from clonemem.importers import IMPORTERS
    from clonemem.llm.registry import PROVIDERS
    from clonemem.registry import RegistryError
    from clonemem.schemas.question_types import QUESTION_TYPES
    from clonemem.stages import STAGES

    for registry, wrong in (
        (STAGES, "not a stage"),
        (PROVIDERS, object),
        (IMPORTERS, dict),
        (QUESTION_TYPES, {"name": "x"}),
        (SYSTEMS, 42),
    ):
        with pytest.raises(RegistryError, match=rf"{registry.kind} 'wrong' must be"):
            registry.add("wrong", wrong)
        assert "wrong" not in registry


def test_a_lazy_entry_is_checked_when_it_is_imported() -> None:
    from clonemem.registry import Registry, RegistryError

    numbers: Registry[int] = Registry(
        "number", accepts=lambda n: isinstance(n, int), expected="an int"
    )
    numbers.add_lazy("pi", "math:pi")
    with pytest.raises(RegistryError, match="number 'pi' must be an int, got 3.14"):
        numbers.get("pi")
    numbers.remove("pi")
    numbers.remove("pi", missing_ok=True)
    with pytest.raises(RegistryError, match="unknown number 'pi'"):
        numbers.remove("pi")


def test_a_system_declares_that_k_does_not_apply_to_it() -> None:
    """The answerer reads a whole-context system's retrieval at every k (a class attribute, not its name)."""
    from clonemem.evaluation.run import context_for
    from clonemem.memory.simple import FullContext

    texts = ("a", "b", "c")
    assert context_for("full_context", texts, 1) == ["a", "b", "c"] and FullContext.ignores_k
    assert context_for("bm25", texts, 1) == ["a"]

    class Whole(FullContext):
        pass

    with SYSTEMS.added("whole_toy", Whole):
        assert context_for("whole_toy", texts, 2) == ["a", "b", "c"]
    assert context_for("a-results-file", texts, 2) == ["a", "b"]  # not registered: the first k
