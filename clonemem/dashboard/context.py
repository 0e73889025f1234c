"""What every page shares: the warehouse (one guarded read-only connection per page render, a snapshot
copy beside a running writer), the benchmark chosen in the sidebar, and how a page reports a warehouse
it cannot read instead of raising."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, overload

import polars as pl
import streamlit as st

from clonemem import settings
from clonemem.dashboard import queries as Q
from clonemem.warehouse.db import WarehouseError
from clonemem.warehouse.guard import GuardedConnection, SqlRefused, open_guarded

WAREHOUSE_ENV = settings.WAREHOUSE
QUERY_TIMEOUT_S = 20.0
MAX_ROWS = 200_000


def warehouse_path(argv: list[str] | None = None) -> Path:
    """The warehouse the app reads: ``--warehouse PATH`` after the script name (``streamlit run app.py --
    --warehouse PATH``), else ``$CLONEMEM_WAREHOUSE``, else ``./clonemem.duckdb``."""
    args = sys.argv[1:] if argv is None else argv
    flag = None
    for i, arg in enumerate(args):
        if arg == "--warehouse" and i + 1 < len(args):
            flag = args[i + 1]
            break
        if arg.startswith("--warehouse="):
            flag = arg.split("=", 1)[1]
            break
    return settings.warehouse(flag)


@dataclass
class Opened:
    """One render's view of the warehouse, as it is being opened: the connection and the benchmark may
    be missing (the problem says why). Pages get a :class:`Session` instead, made once both are checked."""

    path: Path
    db: GuardedConnection | None = None
    problem: str | None = None  # why the warehouse cannot be read at all
    schema: dict[str, list[str]] = field(
        default_factory=dict
    )  # table -> columns, read once per render
    catalog: pl.DataFrame = field(default_factory=pl.DataFrame)
    benchmark: dict[str, Any] | None = None  # the chosen row of ``Q.benchmarks``
    benchmark_problem: str | None = None  # e.g. an unknown ?benchmark= name

    def columns(self, table: str) -> list[str]:
        return self.schema.get(table, [])

    @property
    def snapshot(self) -> bool:
        return self.db is not None and self.db.is_snapshot


@dataclass(frozen=True)
class WarehouseSession:
    """What a page about the whole warehouse reads (``run_page(..., needs_benchmark=False)``): the
    warehouse, open and readable."""

    path: Path
    db: GuardedConnection
    schema: dict[str, list[str]]  # table -> columns, read once per render
    catalog: pl.DataFrame  # the rows of ``Q.benchmarks``
    chosen: dict[str, Any] | None  # the benchmark picked in the sidebar, if any
    benchmark_problem: str | None  # e.g. an unknown ?benchmark= name

    def columns(self, table: str) -> list[str]:
        return self.schema.get(table, [])

    @property
    def snapshot(self) -> bool:
        return self.db.is_snapshot


@dataclass(frozen=True)
class Session(WarehouseSession):
    """What a page about the chosen benchmark reads (``run_page``'s default): also the benchmark (its
    row of ``Q.benchmarks``), chosen and known."""

    benchmark: dict[str, Any]


_current: ContextVar[Opened | None] = ContextVar("clonemem_dashboard_session", default=None)


@contextmanager
def open_session(path: Path) -> Iterator[Opened]:
    """Open the warehouse read-only for one render and close it afterwards (a writer in another process
    is never blocked for longer than a page takes). Problems become ``Opened.problem``, never exceptions."""
    session = Opened(path=path)
    token = _current.set(session)
    try:
        try:
            session.db = open_guarded(path, max_rows=MAX_ROWS, timeout_s=QUERY_TIMEOUT_S)
        except WarehouseError as exc:
            session.problem = str(exc)
        except (OSError, ValueError) as exc:
            session.problem = f"cannot open warehouse {path}: {exc}"
        if session.db is not None:
            try:
                session.schema = Q.schema(session.db)
                # a reader's file has this code's schema (checked when it opened), so the tables are there
                session.catalog = Q.benchmarks(session.db, session.schema["benchmarks"])
            except SqlRefused as exc:
                session.problem = f"cannot read warehouse {path}: {exc}"
        yield session
    finally:
        _current.reset(token)
        if session.db is not None:
            session.db.close()


def current() -> Opened:
    session = _current.get()
    if session is None:  # a page script run on its own, not through app.py
        raise RuntimeError(
            "dashboard pages run inside clonemem/dashboard/app.py (`clonemem dashboard`)"
        )
    return session


def choose_benchmark(session: Opened) -> None:
    """The sidebar's benchmark picker; ``?benchmark=NAME-or-ID`` in the URL chooses one too."""
    if session.problem or session.catalog.height == 0:
        return
    names = session.catalog["name"].to_list()
    ids = session.catalog["benchmark_id"].to_list()
    requested = st.query_params.get("benchmark")
    if requested and requested not in names and requested not in ids:
        session.benchmark_problem = (
            f"no benchmark {requested!r} in {session.path.name} "
            f"(known: {', '.join(names)}); pick one in the sidebar"
        )
    elif requested:
        st.session_state["benchmark"] = (
            names[ids.index(requested)] if requested in ids else requested
        )
    if st.session_state.get("benchmark") not in names:
        st.session_state["benchmark"] = names[0]

    def _sync() -> None:
        st.query_params["benchmark"] = st.session_state["benchmark"]

    st.sidebar.selectbox(
        "Benchmark",
        names,
        key="benchmark",
        on_change=_sync,
        format_func=lambda n: _label(session.catalog, n),
    )
    if session.benchmark_problem is None:
        session.benchmark = session.catalog.row(
            names.index(st.session_state["benchmark"]), named=True
        )


def _label(catalog: pl.DataFrame, name: str) -> str:
    row = catalog.filter(pl.col("name") == name).row(0, named=True)
    offline = (
        ", offline" if row["is_offline"] else ""
    )  # offline content is labelled wherever it appears
    return f"{name} ({row['source']}, gate {row['gate_status']}{offline})"


@overload
def run_page(
    title: str,
    render: Callable[[Session], None],
    *,
    needs_benchmark: Literal[True] = True,
    about: str | None = None,
) -> None: ...


@overload
def run_page(
    title: str,
    render: Callable[[WarehouseSession], None],
    *,
    needs_benchmark: Literal[False],
    about: str | None = None,
) -> None: ...


def run_page(
    title: str,
    render: Callable[[Any], None],
    *,
    needs_benchmark: bool = True,
    about: str | None = None,
) -> None:
    """Render one page: its title, then ``render(session)``; a warehouse or benchmark that cannot be
    read shows a clear message instead of a traceback. ``render`` gets a :class:`Session` (the chosen
    benchmark in ``session.benchmark``), or for a page about the whole warehouse a
    :class:`WarehouseSession`: what was checked here is typed as present there."""
    st.title(title)
    if about:
        st.caption(about)
    opened = current()
    if opened.problem or opened.db is None:
        st.warning(opened.problem or f"cannot open warehouse {opened.path}")
        return
    page = WarehouseSession(
        opened.path,
        opened.db,
        opened.schema,
        opened.catalog,
        opened.benchmark,
        opened.benchmark_problem,
    )
    if needs_benchmark:
        if opened.benchmark_problem:
            st.error(opened.benchmark_problem)
            return
        if opened.benchmark is None:
            st.info(
                f"No benchmarks in {opened.path} yet: create one with `clonemem demo`, "
                "`clonemem import-release FILE --name NAME` or `clonemem import-locomo PATH --name NAME`."
            )
            return
        page = Session(**vars(page), benchmark=opened.benchmark)
    try:
        render(page)
    except (SqlRefused, WarehouseError) as exc:
        st.error(f"Cannot read this page from {opened.path.name}: {exc}")


def run_label(started_at: Any, run_id: str, detail: str) -> str:
    """A run's label in a picker: when, a short id (two runs in one minute with the same systems must
    still differ: a select box tells its options apart by their labels), and what it was."""
    when = f"{started_at:%Y-%m-%d %H:%M:%S}" if started_at else "?"
    return f"{when} · {run_id[:8]} · {detail}"


def pick_run(
    runs: pl.DataFrame, id_column: str, detail_column: str, label: str, key: str, where: Any = st
) -> tuple[str, dict[str, str]]:
    """A select box (in ``where``: the page or one of its columns) over ``runs`` in their order, each
    labelled by :func:`run_label` with ``detail_column``; returns the chosen run id and every run's label."""
    labels = {
        r[id_column]: run_label(r["started_at"], r[id_column], r[detail_column])
        for r in runs.iter_rows(named=True)
    }
    return where.selectbox(label, list(labels), format_func=labels.__getitem__, key=key), labels


def generation_note(session: Session, what: str) -> bool:
    """True when the chosen benchmark was generated; otherwise say plainly that ``what`` needs generation
    internals an imported benchmark does not have."""
    bench = session.benchmark or {}
    if bench.get("source") == "generated":
        return True
    st.info(
        f"Benchmark {bench.get('name')!r} was imported (a release or LoCoMo file): it has no {what}, "
        "which only the generation pipeline records."
    )
    return False
