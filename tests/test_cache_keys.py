"""Cache keys follow the code: an offline handler's edit invalidates its stages only, and a memory
system's edit invalidates its cached results, with no list of modules kept anywhere."""

from __future__ import annotations

import importlib
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from clonemem import codehash
from clonemem.memory import SYSTEMS
from clonemem.stages import STAGES, all_stages


def _fresh() -> None:
    """Forget hashes computed in this process (a code edit normally happens between runs)."""
    codehash.closure.cache_clear()
    codehash._code_hash.cache_clear()
    importlib.invalidate_caches()


@pytest.fixture
def toy_package(tmp_path: Path) -> Iterator[Path]:
    """A package `toyoffline`: two handler modules sharing a helper, and one with a data file."""
    root = tmp_path / "toyoffline"
    (root / "data").mkdir(parents=True)
    (root / "__init__.py").write_text("")
    (root / "common.py").write_text("def shout(s):\n    return s.upper()\n")
    (root / "plans.py").write_text(
        "from toyoffline.common import shout\n\ndef plan(call):\n    return shout('plan')\n"
    )
    (root / "writing.py").write_text(
        "from . import common\nCACHE_DATA = ('toyoffline:data/words.json',)\n\ndef write(call):\n    return 'w'\n"
    )
    (root / "data" / "words.json").write_text('["a"]')
    sys.path.insert(0, str(tmp_path))
    _fresh()
    try:
        yield root
    finally:
        sys.path.remove(str(tmp_path))
        for name in [m for m in sys.modules if m.split(".")[0] == "toyoffline"]:
            del sys.modules[name]
        _fresh()


def test_a_handler_edit_changes_its_module_and_its_importers_only(toy_package: Path) -> None:
    before = {m: codehash.code_hash(f"toyoffline.{m}") for m in ("plans", "writing", "common")}
    assert codehash.closure("toyoffline.plans", ("toyoffline",)) == (
        "toyoffline.common",
        "toyoffline.plans",
    )

    (toy_package / "plans.py").write_text((toy_package / "plans.py").read_text() + "# edited\n")
    _fresh()
    after = {m: codehash.code_hash(f"toyoffline.{m}") for m in ("plans", "writing", "common")}
    assert after["plans"] != before["plans"]
    assert after["writing"] == before["writing"] and after["common"] == before["common"]

    (toy_package / "common.py").write_text("def shout(s):\n    return s.upper() + '!'\n")
    _fresh()
    shared = {m: codehash.code_hash(f"toyoffline.{m}") for m in ("plans", "writing")}
    assert (
        shared["plans"] != after["plans"] and shared["writing"] != after["writing"]
    )  # both import it


def test_declared_data_files_are_part_of_the_hash(toy_package: Path) -> None:
    before = codehash.code_hash("toyoffline.writing")
    (toy_package / "data" / "words.json").write_text('["a", "b"]')
    _fresh()
    assert codehash.code_hash("toyoffline.writing") != before
    assert codehash.code_hash("toyoffline.plans") == codehash.code_hash("toyoffline.plans")


@pytest.mark.parametrize("name", [s.name for s in all_stages()])
def test_every_stage_declares_a_handler_whose_code_is_hashed(name: str) -> None:
    stage = STAGES.get(name)
    assert callable(stage.offline_handler())
    module = stage.offline.partition(":")[0]
    assert module in codehash.closure(module)
    assert len(stage.offline_code_hash()) >= 16


def test_real_stages_are_keyed_on_their_own_handlers() -> None:
    # the generation handlers do not import the QA world, so editing QA's handlers leaves generation cached
    persona = STAGES.get("generation.persona").offline.partition(":")[0]
    qa = STAGES.get("qa.plan").offline.partition(":")[0]
    assert qa not in codehash.closure(persona)
    assert (
        STAGES.get("generation.persona").offline_code_hash()
        != STAGES.get("qa.plan").offline_code_hash()
    )
    # lexicons are data of the world: they are in every generation handler's hash
    assert "clonemem.offline.world.lexicon" in codehash.closure(persona)


# -- a memory system's own code is its cache key ------------------------------------------------------

TOY_SYSTEM = """
from clonemem.memory.base import MemorySystem, Retrieved


class Newest(MemorySystem):
    name = "newest"

    def build(self, traces, ctx):
        self.traces = sorted(traces, key=lambda t: t.event_date)
        ctx.stats["items"] = len(self.traces)

    def retrieve(self, question, k):
        seen = [t for t in self.traces if t.event_date <= question.question_time]
        return [Retrieved(t.content, (t.trace_id,)) for t in reversed(seen[-k:])]
"""


@pytest.mark.slow
@pytest.mark.prefect
def test_editing_a_memory_system_invalidates_its_cached_retrievals(
    tmp_path: Path, demo_file: Path
) -> None:
    from prefect import flow

    from clonemem import runtime
    from clonemem.evaluation.run import load_benchmark
    from clonemem.importers import import_files
    from clonemem.schemas.config import RunConfig
    from clonemem.tasks.evaluation import retrieve_task
    from clonemem.warehouse import Warehouse

    pkg = tmp_path / "toymemory"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "newest.py").write_text(textwrap.dedent(TOY_SYSTEM))
    sys.path.insert(0, str(tmp_path))
    _fresh()
    name = (
        "toymemory.newest:Newest"  # a system named by import path: nothing registered anywhere else
    )
    try:
        with Warehouse.open_writer(tmp_path / "wh.duckdb") as wh:
            import_files(wh, "release", [demo_file], "x")
            persona = load_benchmark(wh, wh.scalar("SELECT benchmark_id FROM benchmarks"))[0]

        @flow
        def retrieve_once() -> str:
            with runtime.use(runtime.Runtime(RunConfig())):
                return retrieve_task(name, persona, 3, return_state=True).name

        assert retrieve_once() == "Completed"
        assert retrieve_once() == "Cached"
        (pkg / "newest.py").write_text(
            textwrap.dedent(TOY_SYSTEM) + "\n# a change to the system's code\n"
        )
        _fresh()
        assert retrieve_once() == "Completed"
        assert retrieve_once() == "Cached"
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("toymemory.newest", None)
        sys.modules.pop("toymemory", None)
        SYSTEMS.remove(name, missing_ok=True)
        _fresh()
