"""One source for question types: the config's defaults, its validation and the landed
`question_type_known` flag read the declarations when they are needed, so a type declared after
import (a plugin's, a test's) is known everywhere, with no copy left behind at eight."""

from __future__ import annotations

from pathlib import Path

from clonemem.importers import import_files
from clonemem.schemas import question_types
from clonemem.schemas.config import RunConfig
from clonemem.warehouse import Warehouse
from tests.conftest import write_json
from tests.test_question_types import HABIT


def test_config_defaults_and_bounds_follow_the_declarations() -> None:
    eight = RunConfig().qa
    assert (
        set(eight.questions_per_type) == set(question_types.names())
        and eight.types_per_segment == 8
    )
    with question_types.declared(HABIT):
        qa = RunConfig().qa
        assert qa.questions_per_type["habit_probe"] == 1 and qa.types_per_segment == 9
        assert RunConfig.model_validate(
            {"qa": {"types_per_segment": 9, "questions_per_type": {"habit_probe": 2}}}
        )
    assert "habit_probe" not in RunConfig().qa.questions_per_type


def test_an_imported_question_of_a_declared_type_is_known(tmp_path: Path, demo_doc: dict) -> None:
    demo_doc["questions"][0]["question_type"] = "habit_probe"
    path = write_json(tmp_path / "lin.json", demo_doc)
    with question_types.declared(HABIT), Warehouse.open_writer(tmp_path / "wh.duckdb") as wh:
        import_files(wh, "release", [path], "x")
        known = wh.rows(
            "SELECT question_type_known FROM questions WHERE question_type = 'habit_probe'"
        )
    assert known == [(True,)]
