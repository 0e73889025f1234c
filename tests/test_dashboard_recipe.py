"""The "Add a dashboard page" recipe of docs/architecture.md, followed in a test: a query function in
``queries.py``, a view module under ``views/`` and one row of the page table (``clonemem/pages.py``).

The project's files stay untouched: the app and its views are copied to a temporary folder, the toy view
is written there, and the query and the table row are added for the test's duration."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import polars as pl
import pytest

from clonemem import dashboard, pages
from clonemem.dashboard import APP
from clonemem.dashboard import queries as Q
from clonemem.warehouse.guard import GuardedConnection
from tests.dashboard_kit import AppTest, benchmark_id, frame, imported_warehouse, sql, texts
from tests.test_recipes import recipe_blocks

# the recipe's own code, as docs/architecture.md gives it: the query (step 1) and the view (step 2)
QUERY, TOY_VIEW = recipe_blocks("Add a dashboard page")


def _recipe_query() -> Callable[[GuardedConnection, str], pl.DataFrame]:
    """Step 1 of the recipe: the page's one SQL read, a named function with bound parameters, defined
    as it would be in `queries.py` (its names are the module's)."""
    namespace: dict[str, object] = {"pl": pl, "Db": GuardedConnection}
    exec(QUERY, namespace)  # the documented code itself, nothing from outside the repository
    return namespace["traces_by_medium"]  # type: ignore[return-value]  # defined by the block above


traces_by_medium = _recipe_query()


@pytest.fixture
def toy_app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "dashboard"
    shutil.copytree(
        APP.parent / "views", folder / "views", ignore=shutil.ignore_patterns("__pycache__")
    )
    shutil.copy(APP, folder / "app.py")
    (folder / "views" / "traces_by_medium.py").write_text(TOY_VIEW, "utf-8")  # step 2: the view
    monkeypatch.setattr(Q, "traces_by_medium", traces_by_medium, raising=False)
    row = ("Traces by medium", "views/traces_by_medium.py", "traces-by-medium")  # step 3: its row
    monkeypatch.setattr(pages, "PAGES", (*pages.PAGES, row))
    monkeypatch.setattr(dashboard, "PAGES", pages.PAGES)
    return folder / "app.py"


def test_a_page_added_by_the_recipe_is_navigated_and_shows_what_sql_says(
    toy_app: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wh = imported_warehouse(tmp_path / "wh.duckdb")
    monkeypatch.setenv("CLONEMEM_WAREHOUSE", str(wh))
    at = AppTest.from_file(str(toy_app), default_timeout=60)
    at.query_params["benchmark"] = "release"
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    at.switch_page("views/traces_by_medium.py").run()
    assert not at.exception, [e.message for e in at.exception]
    assert [t.value for t in at.title] == ["Traces by medium"]
    shown = frame(at, "medium", "traces")
    expected = sql(
        wh,
        "SELECT t.medium, count(*) AS traces FROM traces t JOIN personas p USING (persona_id) "
        "WHERE p.benchmark_id = ? GROUP BY ALL ORDER BY traces DESC, medium",
        [benchmark_id(wh, "release")],
    )
    assert shown.rows() == expected.rows() and expected.height > 0


def test_the_added_page_says_when_there_is_no_warehouse(
    toy_app: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CLONEMEM_WAREHOUSE", str(tmp_path / "nowhere.duckdb"))
    at = AppTest.from_file(str(toy_app), default_timeout=60)
    at.run()
    at.switch_page("views/traces_by_medium.py").run()
    assert not at.exception, [e.message for e in at.exception]
    assert f"no warehouse at {tmp_path / 'nowhere.duckdb'}" in texts(at)
