"""Names (issue 31, item 5): a name that could never be told apart or typed again is refused with one line
naming the flag or field (exit 2), and a name already holding other results on a benchmark needs
``--replace`` or a new name. The checks are small functions (``clonemem.schemas.names``,
``clonemem.evaluation.names``), tested here; the CLI's flags are tested through the CLI in
``tests/test_results_file.py`` and ``tests/test_cli.py``."""

from __future__ import annotations

import datetime as dt
import json

import pytest

from clonemem.errors import ExitCode, exit_code_for
from clonemem.evaluation.names import NameTaken, latest_use, name_reuse, refuse_reuse
from clonemem.schemas.config import ConfigError, RunConfig, load_config
from clonemem.schemas.names import NameRefused, checked_name, name_problem, split_names
from clonemem.warehouse import Warehouse


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        (None, "is empty"),
        ("", "is empty"),
        ("   ", "is blank ('   ': only whitespace)"),
        ("\t\n", "is blank"),
        (" mine", "has whitespace around it (' mine')"),
        ("mine ", "has whitespace around it"),
        ("mi\nne", "contains a control character"),
        ("a\x00b", "contains a control character"),
    ],
)
def test_a_name_that_cannot_be_typed_again_is_refused_naming_the_flag(
    value: str | None, problem: str
) -> None:
    assert (name_problem(value) or "").startswith(problem)
    with pytest.raises(NameRefused) as err:
        checked_name(value, "--name")
    assert str(err.value).startswith(f"--name: the name {problem}") and "\n" not in str(err.value)
    assert exit_code_for(err.value) == ExitCode.USAGE


@pytest.mark.parametrize("value", ["mine", "my system v2", "système-β", "a=b"])
def test_ordinary_names_pass(value: str) -> None:
    assert checked_name(value, "--name") == value and name_problem(value) is None


def test_every_item_and_label_of_a_list_option_is_a_name() -> None:
    assert split_names("bm25, mine ,x=http://127.0.0.1:9/", "--systems") == [
        "bm25",
        "mine",
        "x=http://127.0.0.1:9/",
    ]
    for value, said in [
        ("bm25,,dense", "--systems item 2: the name is empty"),
        ("bm25, ", "--systems item 2: the name is blank"),
        (
            "   =http://127.0.0.1:9/",
            "--systems item 1 ('=http://127.0.0.1:9/'), its label before '='",
        ),
        ("  ", "--systems: no name given"),
    ]:
        with pytest.raises(NameRefused, match="^" + said.replace("(", r"\(").replace(")", r"\)")):
            split_names(value, "--systems")


def test_a_config_name_is_checked_alike(tmp_path) -> None:
    with pytest.raises(ValueError, match="the name is blank"):
        RunConfig(name="   ")
    path = tmp_path / "c.toml"
    path.write_text('name = " spaced "\n', "utf-8")
    with pytest.raises(ConfigError, match="name: .*the name has whitespace around it"):
        load_config(path)


def _evaluated(wh: Warehouse, eid: str, when: str, systems: dict[str, dict[str, str]]) -> None:
    prov = {
        "systems": [{"system": s, "code_hash": "h", "extra": extra} for s, extra in systems.items()]
    }
    wh.upsert(
        "eval_runs",
        [
            {
                "eval_run_id": eid,
                "benchmark_id": "b1",
                "forced": False,
                "started_at": dt.datetime.fromisoformat(when),
                "provenance_json": json.dumps(prov),
            }
        ],
    )


FILE_A = {"file": "a.jsonl", "sha256": "a" * 64}
FILE_B = {"file": "b.jsonl", "sha256": "b" * 64}


def test_a_name_holding_another_files_results_needs_replace(wh: Warehouse) -> None:
    _evaluated(wh, "e1", "2026-01-01 10:00", {"mine": FILE_A, "bm25": {}})
    assert latest_use(wh, "b1", "nobody") is None
    assert name_reuse(wh, "b1", "new-name", FILE_B) is None  # a new name
    assert (
        name_reuse(wh, "b1", "mine", {"file": "renamed.jsonl", "sha256": "a" * 64}) is None
    )  # same content
    stored = name_reuse(wh, "b1", "mine", FILE_B)
    assert stored is not None and stored.eval_run_id == "e1"
    with pytest.raises(NameTaken) as err:
        refuse_reuse(wh, "b1", "tiny", "mine", FILE_B, "--name", replace=False)
    message = str(err.value)
    assert message == (
        "--name 'mine' already names other results on benchmark 'tiny': file a.jsonl, sha256 "
        "aaaaaaaaaaaa… (evaluation e1 of 2026-01-01 10:00:00), not file b.jsonl, sha256 bbbbbbbbbbbb…; "
        "pass --replace to store these as its latest evaluation (the earlier one stays in its "
        "history), or give a new --name"
    )
    assert exit_code_for(err.value) == ExitCode.USAGE
    refuse_reuse(wh, "b1", "tiny", "mine", FILE_B, "--name", replace=True)  # the user's word


def test_the_latest_use_decides_and_other_benchmarks_do_not_count(wh: Warehouse) -> None:
    _evaluated(wh, "e1", "2026-01-01 10:00", {"mine": FILE_A})
    _evaluated(wh, "e2", "2026-01-02 10:00", {"mine": FILE_B})  # replaced
    assert name_reuse(wh, "b1", "mine", FILE_B) is None
    assert name_reuse(wh, "b1", "mine", FILE_A) is not None
    assert name_reuse(wh, "b2", "mine", FILE_A) is None
    # a label that named a remote service is another thing than a results file
    _evaluated(wh, "e3", "2026-01-03 10:00", {"svc": {"remote_url": "http://127.0.0.1:9"}})
    stored = name_reuse(wh, "b1", "svc", FILE_A)
    assert stored is not None and stored.describe().startswith(
        "remote_url http://127.0.0.1:9 (evaluation e3"
    )
    # a remote service's label is its provenance's business (it may move to another port)
    assert name_reuse(wh, "b1", "svc", {"remote_url": "http://127.0.0.1:10"}) is None
