"""The Great Expectations gate: suites over the warehouse tables of one benchmark, run
read-only, results stored per expectation (with failing-row samples) and browsable as Data Docs."""

from __future__ import annotations

import datetime as dt
import json
import os
import uuid
from pathlib import Path
from typing import Any

from clonemem.expectations.checks import CHECKS, Check, type_params
from clonemem.expectations.gx_duckdb import close_all_engines, patch_duckdb_connection
from clonemem.faults import checkpoint
from clonemem.qa.land import cue_stats
from clonemem.schemas.config import DEFAULT_MEDIA_MIX, GateConfig, QAConfig, RunConfig
from clonemem.schemas.results import ExpectationOutcome, GateFailed, GateResult  # noqa: F401 - the verdict's types, also named here
from clonemem.warehouse import Warehouse
from clonemem.warehouse.catalog import resolve_benchmark

SAMPLE_ROWS = 5


def gate_params(wh: Warehouse, bid: str, gate: GateConfig) -> dict[str, Any]:
    """What the expectations compare against: the configured bounds, the superficial-cue statistics,
    and the configured media mix as a SQL query of deviations."""
    cues = cue_stats(wh, bid)
    config_json, source = wh.rows(
        "SELECT config_json::VARCHAR, source FROM benchmarks WHERE benchmark_id = ?", [bid]
    )[0]
    mix = DEFAULT_MEDIA_MIX  # imported benchmarks have no generation config (and no media check)
    wanted = [t for t, n in QAConfig().questions_per_type.items() if n > 0]
    if config_json and source == "generated":
        generated = RunConfig.model_validate_json(config_json)
        mix = generated.generation.media_mix
        wanted = [t for t, n in generated.qa.questions_per_type.items() if n > 0]
    total = sum(mix.values()) or 1.0
    targets = ", ".join(f"('{m}', {w / total:.6f})" for m, w in sorted(mix.items()))
    media_query = (
        "WITH actual AS (SELECT t.medium, count(*)::DOUBLE / sum(count(*)) OVER () AS share FROM traces t "
        "JOIN personas p USING (persona_id) WHERE p.benchmark_id = '{bid}' GROUP BY t.medium), "
        f"target(medium, share) AS (VALUES {targets}) "
        "SELECT coalesce(target.medium, actual.medium) AS medium, "
        "abs(coalesce(actual.share, 0) - coalesce(target.share, 0)) AS deviation "
        "FROM target FULL OUTER JOIN actual ON target.medium = actual.medium"
    )
    return {
        **gate.model_dump(),
        **type_params(),
        "longest_option_accuracy": cues.longest_option_accuracy,
        "overlap_option_accuracy": cues.overlap_option_accuracy,
        "media_mix_query": media_query,
        "type_counts_query": type_counts_query(wanted),
        "cues": cues.model_dump(),
    }


def type_counts_query(types: list[str]) -> str:
    """Accepted questions of each wanted type (a row per type, so a type with none shows as 0)."""
    wanted = ", ".join("('" + t.replace("'", "''") + "')" for t in sorted(types)) or "(NULL)"
    return (
        f"WITH wanted(question_type) AS (VALUES {wanted}) SELECT w.question_type, "
        "(SELECT count(*) FROM questions q WHERE q.benchmark_id = '{bid}' AND q.question_type = w.question_type) "
        "AS accepted FROM wanted w WHERE w.question_type IS NOT NULL"
    )


def applicable(source: str) -> list[Check]:
    return [c for c in CHECKS if c.applies == "all" or source == "generated"]


def run_gate(
    warehouse_path: str | Path,
    ref: str,
    gate: GateConfig | None = None,
    docs_dir: str | Path | None = None,
    run_id: str | None = None,
) -> GateResult:
    """Validate one benchmark; store the results; mark the benchmark passed or failed."""
    warehouse_path = Path(warehouse_path).expanduser().resolve()
    with Warehouse.open_reader(warehouse_path) as wh:
        bid, name = resolve_benchmark(wh, ref)
        source = wh.scalar("SELECT source FROM benchmarks WHERE benchmark_id = ?", [bid])
        if gate is None:
            config_json = wh.scalar(
                "SELECT config_json::VARCHAR FROM benchmarks WHERE benchmark_id = ?", [bid]
            )
            gate = (
                RunConfig.model_validate_json(config_json).gate
                if source == "generated" and config_json
                else GateConfig()
            )
        params = gate_params(wh, bid, gate)
    docs = Path(docs_dir) if docs_dir else warehouse_path.with_name(warehouse_path.name + ".gx")
    started = dt.datetime.now(dt.UTC).replace(tzinfo=None)
    outcomes, docs_index = _validate(warehouse_path, bid, applicable(source), params, docs)
    status = "passed" if all(o.success for o in outcomes) else "failed"
    gate_run_id = run_id or str(uuid.uuid4())
    with Warehouse.open_writer(warehouse_path) as wh:
        with wh.transaction():
            wh.upsert(
                "gate_runs",
                [
                    {
                        "gate_run_id": gate_run_id,
                        "benchmark_id": bid,
                        "run_id": run_id,
                        "status": status,
                        "started_at": started,
                        "finished_at": dt.datetime.now(dt.UTC).replace(tzinfo=None),
                        "data_docs_path": docs_index,
                        "summary": json.dumps(
                            {
                                "expectations": len(outcomes),
                                "failed": sum(not o.success for o in outcomes),
                                "cues": params["cues"],
                                "source": source,
                            },
                            default=str,
                        ),
                    }
                ],
            )
            wh.upsert(
                "gate_results",
                [
                    {
                        "gate_run_id": gate_run_id,
                        "suite": o.suite,
                        "expectation": o.expectation,
                        "success": o.success,
                        "observed": json.dumps(o.observed, default=str),
                        "unexpected_count": o.unexpected_count,
                        "failing_sample": json.dumps(o.failing_sample, default=str),
                    }
                    for o in outcomes
                ],
            )
            # the verdict is the last stage of a benchmark: from now on readers list it as complete
            wh.execute(
                "UPDATE benchmarks SET gate_status = ?, status = 'complete' WHERE benchmark_id = ?",
                [status, bid],
            )
            checkpoint("gate.verdict")
    return GateResult(gate_run_id, bid, name, status, outcomes, docs_index, params)


def _validate(
    path: Path, bid: str, checks: list[Check], params: dict[str, Any], docs: Path
) -> tuple[list[ExpectationOutcome], str | None]:
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
    import great_expectations as gx  # slow to import: only when a gate runs
    from great_expectations.data_context.types.base import (
        DataContextConfig,
        InMemoryStoreBackendDefaults,
        ProgressBarsConfig,
    )
    from great_expectations.data_context.types.resource_identifiers import (
        ExpectationSuiteIdentifier,
    )
    from great_expectations.datasource.fluent import BatchDefinition, SQLDatasource
    from great_expectations.datasource.fluent.sql_datasource import QueryAsset

    from clonemem.expectations.docs_views import site_views  # loads GX: as above

    patch_duckdb_connection()
    site = docs / "gx" / "uncommitted" / "data_docs" / "local_site"
    site.mkdir(parents=True, exist_ok=True)
    # An ephemeral context: a file-backed one rewrites its YAML config after every asset added (67 times
    # for a gate, most of a warm gate's 8 s); only the Data Docs site is written, once, to the files.
    context = gx.get_context(
        mode="ephemeral",
        project_config=DataContextConfig(
            store_backend_defaults=InMemoryStoreBackendDefaults(),
            data_docs_sites={
                "local_site": {
                    "class_name": "SiteBuilder",
                    "show_how_to_buttons": False,
                    "store_backend": {
                        "class_name": "TupleFilesystemStoreBackend",
                        "base_directory": str(site),
                    },
                    **site_views(),  # GX's views, compiling each template once per process
                }
            },
            analytics_enabled=False,
        ),
    )
    context.variables.progress_bars = ProgressBarsConfig(globally=False)
    validations = []
    by_suite: dict[str, list[tuple[Check, str]]] = {}
    for i, check in enumerate(checks):
        by_suite.setdefault(f"{check.suite}.{i:02d}", []).append(
            (check, check.batch_query(bid, params))
        )
    # Same connection settings as the pipeline's writer, so both may be open in one process (DuckDB
    # refuses a second configuration of one file); the gate only ever runs SELECTs. Every query asset
    # is declared with the data source: added one at a time, each asset and each batch definition
    # saved the whole context configuration again and ran a test query (a tiny gate: 67 and 33).
    assets = [
        QueryAsset(
            name=f"q{key}", query=items[0][1], batch_definitions=[BatchDefinition(name="all")]
        )
        for key, items in by_suite.items()
    ]
    datasource = context.data_sources.add_or_update_sql(
        SQLDatasource(name="warehouse", connection_string=f"duckdb:///{path}", assets=assets)
    )
    outcomes: list[ExpectationOutcome] = []
    try:
        for key, items in by_suite.items():
            check, query = items[0]
            batch_def = datasource.get_asset(f"q{key}").get_batch_definition("all")
            suite = context.suites.add_or_update(gx.ExpectationSuite(name=key))
            expectation = check.expectation(params)
            expectation.meta = {"check": check.name}
            suite.add_expectation(expectation)
            validations.append(
                context.validation_definitions.add_or_update(
                    gx.ValidationDefinition(name=f"v{key}", data=batch_def, suite=suite)
                )
            )
        # No UpdateDataDocsAction: it rebuilds the site's index once per validation (most of a gate's
        # time); the site is built once below from every result of the run instead.
        checkpoint = context.checkpoints.add_or_update(
            gx.Checkpoint(
                name="clonemem-gate",
                validation_definitions=validations,
                actions=[],
                result_format="SUMMARY",
            )
        )
        run = checkpoint.run()
        # results and suites in one list, as GX's own docs action passes them (its annotation says one kind)
        pages: list[Any] = [
            *run.run_results,
            *(ExpectationSuiteIdentifier(name=key) for key in by_suite),
        ]
        context.build_data_docs(resource_identifiers=pages)
        results = {vr.suite_name: vr for vr in run.run_results.values()}
        engine = datasource.get_execution_engine()
        for key, items in by_suite.items():
            check, query = items[0]
            vr = results[key]
            for r in vr.results:
                res = r.result or {}
                error = _error(r)
                sample = (
                    _sample(engine, check, query, params) if not r.success and not error else []
                )
                measured = None if error else _measured(engine, check.expectation(params), query)
                observed = (
                    {"error": error}
                    if error
                    else measured
                    if measured is not None
                    else res.get("observed_value", res.get("partial_unexpected_list"))
                )
                outcomes.append(
                    ExpectationOutcome(
                        suite=check.suite,
                        expectation=check.name,
                        success=bool(r.success),
                        observed=observed,
                        unexpected_count=_unexpected(expectation_of(check, params), res),
                        failing_sample=sample,
                    )
                )
    finally:
        close_all_engines()
    index = site / "index.html"
    return outcomes, str(index) if index.exists() else None


def expectation_of(check: Check, params: dict[str, Any]) -> Any:
    return check.expectation(params)


def _unexpected(expectation: Any, res: dict) -> int | None:
    """Failing-row count: GX's column expectations report it; the custom-SQL one reports it as its observed value."""
    if "unexpected_count" in res:
        return res["unexpected_count"]
    if getattr(expectation, "unexpected_rows_query", None) and isinstance(
        res.get("observed_value"), int
    ):
        return res["observed_value"]
    return None


def _error(result: Any) -> str | None:
    info = getattr(result, "exception_info", None) or {}
    if isinstance(info, dict) and info.get("raised_exception"):
        return str(info.get("exception_message"))[:500]
    for value in info.values() if isinstance(info, dict) else []:
        if isinstance(value, dict) and value.get("raised_exception"):
            return str(value.get("exception_message"))[:500]
    return None


MEASURED_ROWS = 50


def _measured(engine: Any, expectation: Any, batch_query: str) -> dict[str, Any] | None:
    """A bounded expectation's measured value with its bounds (None for any other kind). GX reports only
    the rows outside the bounds of a column-between check (``[]`` when it passes), so the gate reads the
    column itself: ``value`` is the largest value (the one value of a rate, the largest deviation of the
    media mix), ``rows`` every row when there are several."""
    import sqlalchemy as sa

    column = getattr(expectation, "column", None)
    if (
        column is None
        or not hasattr(expectation, "min_value")
        or not hasattr(expectation, "max_value")
    ):
        return None
    low, high = expectation.min_value, expectation.max_value
    with engine.engine.connect() as conn:
        rows = [
            dict(r)
            for r in conn.execute(
                sa.text(f"SELECT * FROM ({batch_query}) AS measured LIMIT {MEASURED_ROWS}")
            )
            .mappings()
            .all()
        ]
    values = [float(r[column]) for r in rows if r.get(column) is not None]
    value = max(values) if values else None
    out: dict[str, Any] = {"column": column, "value": value, "min_value": low, "max_value": high}
    if len(rows) > 1:
        out["rows"] = rows
    return out


def _sample(engine: Any, check: Check, batch_query: str, params: dict[str, Any]) -> list[dict]:
    """The first failing rows, for the stored result (GX's custom-SQL expectation reports only a count)."""
    import sqlalchemy as sa

    expectation = check.expectation(params)
    sql = getattr(expectation, "unexpected_rows_query", None)
    if sql:
        sql = sql.replace("{batch}", f"({batch_query}) AS subselect")  # as GX substitutes it
    else:
        sql = batch_query
    with (
        engine.engine.connect() as conn
    ):  # not GX's persisted connection, which a failed query may have aborted
        rows = conn.execute(sa.text(f"SELECT * FROM ({sql}) LIMIT {SAMPLE_ROWS}")).mappings().all()
    return [dict(r) for r in rows]
