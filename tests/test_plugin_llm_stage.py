"""A plugin memory system with its own LLM stage (``keyfacts`` in the example plugin under
``examples/``): its stage's prompt ships in the plugin (a package-qualified template name), its offline
handler lives in the plugin, its calls are logged with the extractor role, and its cache key follows
its plugin template like a built-in system's follows ``prompts/templates/``."""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

import jinja2
import pytest
from prefect.settings import PREFECT_TASKS_REFRESH_CACHE, temporary_settings
from pydantic import BaseModel
from typer.testing import CliRunner

from clonemem import prompts, runtime
from clonemem.cli import app
from clonemem.importers import import_files
from clonemem.memory import SYSTEMS
from clonemem.offline import OfflineCall
from clonemem.schemas.config import RunConfig
from clonemem.stages import STAGES, Stage
from clonemem.tasks.caching import MemorySystemPolicy, stage_key_parts
from clonemem.warehouse import Warehouse

TEMPLATE = "clonemem_example_plugin:keyfacts"


def _key(system: str, config: RunConfig) -> str:
    with runtime.use(runtime.Runtime(config)):
        return MemorySystemPolicy().compute_key(None, {"system": system}, {})


def test_keyfacts_is_listed_and_its_stage_prompt_comes_from_the_plugin() -> None:
    got = CliRunner().invoke(app, ["systems", "--json"])
    assert got.exit_code == 0 and "keyfacts" in json.loads(got.output)
    factory = SYSTEMS.get("keyfacts")
    assert factory.__module__ == "clonemem_example_plugin.keyfacts"
    (stage,) = factory.llm_stages
    assert STAGES.get("example.keyfact") is stage
    assert (stage.template, stage.role) == (TEMPLATE, "extractor")
    import clonemem_example_plugin

    shipped = Path(clonemem_example_plugin.__file__).parent / "templates" / "keyfacts.j2"
    assert prompts.template_source(TEMPLATE) == shipped.read_text("utf-8")
    inp = stage.inputs(
        trace_id="t1",
        medium="diary",
        event_date="2024-03-01T09:00:00",
        content="I adopted a grey cat named Miso. She sleeps all day.",
    )
    prompt = stage.render(inp)
    assert "I adopted a grey cat named Miso." in prompt.user and "key-fact notes" in prompt.system
    assert prompt.template_hash == prompts.template_hash(TEMPLATE)
    offline = stage.offline_handler()
    assert offline.__module__ == "clonemem_example_plugin.keyfacts"
    assert (
        stage.output.model_validate(offline(_call(inp))).fact == "I adopted a grey cat named Miso."
    )


def _call(inp: BaseModel) -> OfflineCall:
    return OfflineCall(stage="example.keyfact", inputs=inp, rng=random.Random(0), model="offline")


def test_keyfacts_cache_key_follows_its_plugin_template_model_and_seed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    key = _key("keyfacts", RunConfig())
    assert _key("keyfacts", RunConfig()) == key
    assert (
        _key("keyfacts", RunConfig.model_validate({"models": {"extractor": "openai/gpt-4o-mini"}}))
        != key
    )
    assert _key("keyfacts", RunConfig(seed=RunConfig().seed + 1)) != key
    source = prompts.template_source
    monkeypatch.setattr(
        prompts,
        "template_source",
        lambda name: source(name) + ("{# edited #}" if name == TEMPLATE else ""),
    )
    prompts.template_hash.cache_clear()
    try:
        assert _key("keyfacts", RunConfig()) != key
    finally:
        monkeypatch.setattr(prompts, "template_source", source)
        prompts.template_hash.cache_clear()
    assert _key("keyfacts", RunConfig()) == key


@pytest.fixture
def toy_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An importable package ``toy_prompts_pkg`` with one template, as a plugin ships its prompts."""
    folder = tmp_path / "toy_prompts_pkg"
    (folder / "templates").mkdir(parents=True)
    (folder / "__init__.py").write_text("", "utf-8")
    (folder / "templates" / "note.j2").write_text(
        "{% block system %}Be brief.{% endblock %}{% block user %}Note: {{ inp }}{% endblock %}",
        "utf-8",
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    yield folder
    sys.modules.pop("toy_prompts_pkg", None)
    prompts.template_hash.cache_clear()


def test_a_package_template_is_rendered_and_its_file_is_in_the_key(toy_package: Path) -> None:
    prompt = prompts.render("toy_prompts_pkg:note", inp="milk")
    assert (prompt.system, prompt.user) == ("Be brief.", "Note: milk")
    stage = Stage(
        "toy.note", "toy_prompts_pkg:note", "extractor", BaseModel, BaseModel, offline="json:dumps"
    )
    before = stage_key_parts([stage], RunConfig())
    (toy_package / "templates" / "note.j2").write_text(
        "{% block system %}Be very brief.{% endblock %}{% block user %}Note: {{ inp }}{% endblock %}",
        "utf-8",
    )
    prompts.template_hash.cache_clear()
    assert stage_key_parts([stage], RunConfig()) != before
    assert prompts.template_hash("summarize_trace") == prompts.template_hash(
        "summarize_trace"
    )  # built-ins unchanged


def test_bad_template_names_say_what_is_wrong(toy_package: Path) -> None:
    with pytest.raises(ValueError, match="package 'no_such_pkg_xyz' cannot be imported"):
        prompts.template_source("no_such_pkg_xyz:note")
    with pytest.raises(
        jinja2.TemplateNotFound, match="no templates/missing.j2 in package 'toy_prompts_pkg'"
    ):
        prompts.render("toy_prompts_pkg:missing")
    with pytest.raises(ValueError, match="expected 'stem' or 'package:stem'"):
        prompts.template_source("../etc/passwd")


@pytest.mark.prefect
def test_keyfacts_is_evaluated_offline_through_the_cli_and_its_calls_are_logged(
    tmp_path: Path,
) -> None:
    from clonemem.demo import fixture_files

    wh_path = tmp_path / "wh.duckdb"
    with Warehouse.open_writer(wh_path) as wh:
        import_files(wh, "release", fixture_files(), "imported")
    out = tmp_path / "eval.json"
    # its calls are made here whatever earlier tests cached (cached calls land only where they were made)
    with temporary_settings(updates={PREFECT_TASKS_REFRESH_CACHE: True}):
        got = CliRunner().invoke(
            app,
            [
                "--warehouse",
                str(wh_path),
                "evaluate",
                "imported",
                "--systems",
                "keyfacts,random",
                "--k",
                "5",
                "--json",
                str(out),
                "--force",
            ],
        )
    assert got.exit_code == 0, got.output
    results = {r["system"]: r for r in json.loads(out.read_text("utf-8"))["results"]}
    assert results["keyfacts"]["n_questions"] > 0
    assert results["keyfacts"]["recall_flat"] > 0
    with Warehouse.open_reader(wh_path) as wh:
        calls = wh.rows(
            "SELECT role, provider, is_offline, outcome, count(*) FROM llm_calls "
            "WHERE stage = 'example.keyfact' GROUP BY ALL"
        )
        (n_traces,) = wh.rows(
            "SELECT count(*) FROM traces JOIN personas USING (persona_id) JOIN benchmarks b USING (benchmark_id) "
            "WHERE b.name = 'imported'"
        )[0]
    assert calls == [("extractor", "offline", True, "ok", n_traces)]  # one note per trace
