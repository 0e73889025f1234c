"""Release import/export: acceptance, rejection with file and JSON path, round-trips."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from clonemem import ids
from clonemem.exporters.release import export_release
from clonemem.importers import import_files
from clonemem.importers.base import ImportFailed
from clonemem.schemas.versions import RELEASE
from clonemem.warehouse import Warehouse, catalog
from tests.cli_kit import command_built_once  # noqa: F401  # a fixture
from tests.conftest import write_json

pytestmark = pytest.mark.usefixtures("command_built_once")

CONTENT_TABLES = [
    "benchmarks",
    "personas",
    "traces",
    "questions",
    "question_traces",
    "question_choices",
    "question_evidence",
    "evidence",
    "evidence_traces",
]


def table_rows(wh: Warehouse) -> dict[str, list]:
    out = {}
    for table in CONTENT_TABLES:
        cols = [
            r[0]
            for r in wh.rows(
                f"SELECT column_name FROM duckdb_columns() WHERE table_name = '{table}'"
            )
        ]
        out[table] = sorted(
            wh.rows(f"SELECT * FROM {table}"), key=lambda r: tuple(str(v) for v in r)
        )
        assert cols
    return out


def test_import_counts_and_flags(wh: Warehouse, demo_file: Path) -> None:
    summary = import_files(wh, "release", [demo_file], "demo")
    assert (summary.personas, summary.traces, summary.questions) == (1, 16, 6)
    assert summary.free_text_only == 2
    assert summary.unknown_question_types == {"self_reflection": 1}
    assert summary.evidence_without_traces == 1
    known = dict(wh.rows("SELECT external_id, question_type_known FROM questions"))
    assert known["q06"] is False and known["q01"] is True
    free = wh.rows(
        "SELECT correct_choice_id, (SELECT count(*) FROM question_choices c WHERE c.question_id = q.question_id)"
        " FROM questions q WHERE external_id = 'q03'"
    )
    assert free == [(None, 0)]
    # context order is kept (the file's context is not sorted by date)
    order = [r[0] for r in wh.rows("SELECT external_id FROM traces ORDER BY seq")]
    assert order[:3] == ["t04", "t01", "t06"]


def test_round_trip_import_export_import(tmp_path: Path, demo_file: Path) -> None:
    with Warehouse.open_writer(tmp_path / "a.duckdb") as a:
        import_files(a, "release", [demo_file], "bench")
        first = table_rows(a)
        files = export_release(a, "bench", tmp_path / "out")
    with Warehouse.open_writer(tmp_path / "b.duckdb") as b:
        import_files(b, "release", files, "bench")
        second = table_rows(b)
        files2 = export_release(b, "bench", tmp_path / "out2")
    # config_json holds file names, equal here; every row is equal
    assert first == second
    exported = json.loads(files[0].read_text("utf-8"))
    original = json.loads(demo_file.read_text("utf-8"))
    original.pop("release_version")  # unknown field: ignored on import
    assert exported.pop("format_version") == RELEASE.version  # written by the exporter
    for q in original["questions"]:
        q.pop("notes", None)
    assert exported == original
    assert files2[0].read_text("utf-8") == files[0].read_text("utf-8")


def test_reimport_replaces_persona_rows(wh: Warehouse, tmp_path: Path, demo_doc: dict) -> None:
    import_files(wh, "release", [write_json(tmp_path / "p.json", demo_doc)], "bench")
    smaller = copy.deepcopy(demo_doc)
    smaller["questions"] = smaller["questions"][:2]
    import_files(wh, "release", [write_json(tmp_path / "p.json", smaller)], "bench", mode="replace")
    assert wh.scalar("SELECT count(*) FROM questions") == 2
    assert (
        wh.scalar("SELECT count(*) FROM question_evidence") == 5
    )  # q01 (2) + q02 (3), no leftovers
    assert wh.scalar("SELECT count(*) FROM personas") == 1


def test_any_medium_and_timezones_accepted(wh: Warehouse, tmp_path: Path, demo_doc: dict) -> None:
    doc = copy.deepcopy(demo_doc)
    doc["context"][0]["medium"] = "voice_note"
    doc["context"][0]["event_date"] = "2023-02-14T09:30:00+02:00"
    import_files(wh, "release", [write_json(tmp_path / "p.json", doc)], "bench")
    got = wh.rows("SELECT medium, event_date FROM traces WHERE external_id = 't04'")[0]
    assert got[0] == "voice_note"
    assert got[1].isoformat() == "2023-02-14T07:30:00"  # stored as naive UTC


def _broken(demo_doc: dict, mutate) -> dict:
    doc = copy.deepcopy(demo_doc)
    mutate(doc)
    return doc


@pytest.mark.parametrize(
    ("mutate", "path", "words"),
    [
        (lambda d: d.pop("questions"), "$.questions", "required field is missing"),
        (
            lambda d: d["questions"][2]["evidence"][1]["digital_trace_ids"].append("t99"),
            "$.questions[2].evidence[1].digital_trace_ids[1]",
            "'t99'",
        ),
        (lambda d: d["context"][4].__setitem__("id", 17), "$.context[4].id", "string"),
        (lambda d: d["questions"][0].__setitem__("id", 5), "$.questions[0].id", "string"),
        (
            lambda d: d["questions"][1]["digital_trace_ids"].append("nope"),
            "$.questions[1].digital_trace_ids[3]",
            "not in context",
        ),
        (
            lambda d: d["context"][5].__setitem__("id", "t04"),
            "$.context[5].id",
            "duplicate trace id",
        ),
        (
            lambda d: d["questions"][0].__setitem__("correct_choice_id", "Z"),
            "$.questions[0].correct_choice_id",
            "not one of",
        ),
        (
            lambda d: d["questions"][2].__setitem__("correct_choice_id", "A"),
            "$.questions[2].correct_choice_id",
            "choices is empty",
        ),
        (
            lambda d: d["context"][1].__setitem__("event_date", "yesterday"),
            "$.context[1].event_date",
            "datetime",
        ),
    ],
)
def test_malformed_files_rejected_with_path(
    wh: Warehouse, tmp_path: Path, demo_doc: dict, mutate, path, words
) -> None:
    bad = write_json(tmp_path / "bad.json", _broken(demo_doc, mutate))
    with pytest.raises(ImportFailed) as err:
        import_files(wh, "release", [bad], "bench")
    text = str(err.value)
    assert f"{bad}: {path}:" in text
    assert words in text
    assert wh.scalar("SELECT count(*) FROM traces") == 0
    assert wh.scalar("SELECT count(*) FROM benchmarks") == 0


def test_bad_json_names_file_and_position(wh: Warehouse, tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"person_name": "x", "person_id": "p", "context": [}', "utf-8")
    with pytest.raises(ImportFailed) as err:
        import_files(wh, "release", [bad], "bench")
    assert str(err.value).startswith(f"{bad}: $: not valid JSON")
    assert "column" in str(err.value)


def test_one_bad_file_loads_nothing_from_any(wh: Warehouse, tmp_path: Path, demo_doc: dict) -> None:
    good = write_json(tmp_path / "good.json", demo_doc)
    other = copy.deepcopy(demo_doc)
    other["person_id"] = "someone_else"
    other["questions"][0]["evidence"][0]["digital_trace_ids"] = ["missing"]
    bad = write_json(tmp_path / "bad.json", other)
    with pytest.raises(ImportFailed):
        import_files(wh, "release", [good, bad], "bench")
    assert wh.scalar("SELECT count(*) FROM personas") == 0


def test_duplicate_person_across_files(wh: Warehouse, tmp_path: Path, demo_doc: dict) -> None:
    a = write_json(tmp_path / "a.json", demo_doc)
    b = write_json(tmp_path / "b.json", demo_doc)
    with pytest.raises(ImportFailed, match=r"b.json: \$.person_id: person 'lin_chen' is also in"):
        import_files(wh, "release", [a, b], "bench")


def test_failure_inside_the_transaction_rolls_back(
    wh: Warehouse, demo_file: Path, monkeypatch
) -> None:
    import_files(wh, "release", [demo_file], "bench")
    before = table_rows(wh)

    def explode(*args, **kwargs):
        raise RuntimeError("disk full")

    real_upsert = wh.upsert
    monkeypatch.setattr(
        wh, "upsert", lambda t, rows: explode() if t == "questions" else real_upsert(t, rows)
    )
    with pytest.raises(RuntimeError):
        import_files(wh, "release", [demo_file], "bench", mode="replace")
    monkeypatch.undo()
    assert table_rows(wh) == before


def test_export_unknown_benchmark(wh: Warehouse, tmp_path: Path) -> None:
    with pytest.raises(catalog.UnknownBenchmark, match="no benchmark 'nope'"):
        export_release(wh, "nope", tmp_path)


def test_export_by_id_or_name(wh: Warehouse, demo_file: Path, tmp_path: Path) -> None:
    summary = import_files(wh, "release", [demo_file], "bench")
    by_id = export_release(wh, summary.benchmark_id, tmp_path / "a")
    by_name = export_release(wh, "bench", tmp_path / "b")
    assert by_id[0].read_bytes() == by_name[0].read_bytes()


# -- the published release files (issue 9): fixtures that reproduce each published fact -------------

PUBLISHED = Path(__file__).parent / "fixtures" / "published"
ZWJ = "\u200d"


def test_published_folder_imports_en_and_zh_as_two_personas(wh: Warehouse) -> None:
    summary = import_files(wh, "release", [PUBLISHED / "100k"], "published")
    assert (summary.personas, summary.questions) == (2, 6)
    assert summary.languages == {"en": 1, "zh": 1}
    assert summary.unknown_question_types == {}
    assert summary.relabelled == {"inference -> inferential": 2}
    personas = wh.rows("SELECT person_key, language, source_file FROM personas ORDER BY language")
    assert personas == [
        ("P07", "en", "zhou_min_benchmark_en.json"),
        ("P07", "zh", "zhou_min_benchmark_zh.json"),
    ]
    assert wh.scalar("SELECT count(DISTINCT benchmark_id) FROM personas") == 1
    inferential = wh.rows(
        "SELECT question_type, source_question_type, question_type_known FROM questions "
        "WHERE source_question_type = 'inference'"
    )
    assert inferential == [("inferential", "inference", True)] * 2
    four = wh.rows(
        "SELECT q.external_id, string_agg(c.choice_id, '' ORDER BY c.seq) FROM questions q "
        "JOIN question_choices c USING (question_id) WHERE q.question_type = 'unanswerable' GROUP BY ALL"
    )
    assert sorted(r[1] for r in four) == ["ABCE", "ABCE"]
    media = {r[0] for r in wh.rows("SELECT DISTINCT medium FROM traces")}
    assert {"work_log", "calendar_event", "consumption_log", "todo_list", "wechat_moments"} <= media


def test_emoji_with_zero_width_joiners_are_kept_exactly(wh: Warehouse) -> None:
    import_files(wh, "release", [PUBLISHED / "100k"], "published")
    doc = json.loads((PUBLISHED / "100k" / "zhou_min_benchmark_en.json").read_text("utf-8"))
    stored = dict(
        wh.rows(
            "SELECT external_id, content FROM traces WHERE persona_id IN "
            "(SELECT persona_id FROM personas WHERE language = 'en')"
        )
    )
    with_zwj = [t for t in doc["context"] if ZWJ in t["content"]]
    assert len(with_zwj) >= 3
    for t in with_zwj:
        assert stored[t["id"]] == t["content"]


def test_published_round_trip_is_lossless(tmp_path: Path) -> None:
    """import -> export (qa_items) reproduces the published files byte for byte, plus the line of the format's
    version (the published files predate versions); -> import gives equal rows."""
    files = sorted((PUBLISHED / "100k").glob("*.json"))
    with Warehouse.open_writer(tmp_path / "a.duckdb") as a:
        import_files(a, "release", [PUBLISHED / "100k"], "published")
        first = table_rows(a)
        as_published = export_release(
            a, "published", tmp_path / "qa_items", questions_key="qa_items"
        )
        documented = export_release(a, "published", tmp_path / "questions")
    assert [p.name for p in as_published] == [f.name for f in files]
    for exported, original in zip(as_published, files, strict=True):
        version = f'{{\n "format_version": "{RELEASE.version}",\n'.encode()
        assert exported.read_bytes() == original.read_bytes().replace(b"{\n", version, 1)
    for path in documented:  # the documented key by default, same content otherwise
        doc = json.loads(path.read_text("utf-8"))
        assert "questions" in doc and "qa_items" not in doc
        assert doc["format_version"] == RELEASE.version
        assert (
            doc["questions"]
            == json.loads((PUBLISHED / "100k" / path.name).read_text("utf-8"))["qa_items"]
        )
    with Warehouse.open_writer(tmp_path / "b.duckdb") as b:
        import_files(b, "release", documented, "published")
        assert table_rows(b) == first


def test_both_question_keys_is_an_error_naming_the_file(wh: Warehouse, tmp_path: Path) -> None:
    doc = json.loads((PUBLISHED / "100k" / "zhou_min_benchmark_en.json").read_text("utf-8"))
    doc["questions"] = doc["qa_items"]
    bad = write_json(tmp_path / "both.json", doc)
    with pytest.raises(
        ImportFailed, match=r"both.json: \$: both `questions` and `qa_items` are present"
    ):
        import_files(wh, "release", [bad], "bench")
    assert wh.scalar("SELECT count(*) FROM benchmarks") == 0


def test_errors_in_qa_items_name_that_key(wh: Warehouse, tmp_path: Path) -> None:
    doc = json.loads((PUBLISHED / "100k" / "zhou_min_benchmark_en.json").read_text("utf-8"))
    doc["qa_items"][1]["evidence"][0]["digital_trace_ids"] = ["dt_9999"]
    doc["qa_items"][2]["id"] = 3
    bad = write_json(tmp_path / "bad.json", doc)
    with pytest.raises(ImportFailed) as err:
        import_files(wh, "release", [bad], "bench")
    assert "$.qa_items[2].id: Input should be a valid string" in str(err.value)


def test_release_root_with_two_sizes_is_refused_clearly(wh: Warehouse) -> None:
    with pytest.raises(
        ImportFailed, match=r"person 'P07' is also in .*100k.*import each under its own --name"
    ):
        import_files(wh, "release", [PUBLISHED], "all")
    for size in ("100k", "500k"):
        import_files(wh, "release", [PUBLISHED / size], f"published-{size}")
    assert dict(wh.rows("SELECT name, traces FROM v_benchmarks")) == {
        "published-100k": 13,
        "published-500k": 25,
    }


def test_language_from_content_when_the_name_says_nothing(wh: Warehouse, tmp_path: Path) -> None:
    doc = json.loads((PUBLISHED / "100k" / "zhou_min_benchmark_zh.json").read_text("utf-8"))
    import_files(wh, "release", [write_json(tmp_path / "someone.json", doc)], "bench")
    assert wh.scalar("SELECT language FROM personas") == "zh"
    assert wh.scalar("SELECT language FROM benchmarks") == "zh"


def _gate(wh_path: Path, name: str, tmp_path: Path):
    from clonemem.expectations.gate import run_gate

    return run_gate(wh_path, name, docs_dir=tmp_path / f"docs-{name}")


def test_gate_judges_a_published_file_by_what_the_release_promises(tmp_path: Path) -> None:
    wh_path = tmp_path / "wh.duckdb"
    with Warehouse.open_writer(wh_path) as wh:
        import_files(wh, "release", [PUBLISHED / "100k"], "published")
        # genuinely broken options, one kind per question, on a second copy
        import_files(wh, "release", [PUBLISHED / "500k"], "broken")
        bid = ids.benchmark_id("broken")
        qid = dict(
            wh.rows(
                "SELECT p.language || ':' || q.external_id, q.question_id FROM questions q "
                "JOIN personas p USING (persona_id) WHERE q.benchmark_id = ?",
                [bid],
            )
        )
        wh.execute(
            "DELETE FROM question_choices WHERE question_id = ? AND choice_id = 'D'",
            [qid["en:q_001"]],
        )
        wh.execute(
            "UPDATE question_choices SET choice_id = 'D', text = 'Something else' "
            "WHERE question_id = ? AND choice_id = 'E'",
            [qid["en:q_003"]],
        )
        wh.execute(
            "UPDATE questions SET correct_choice_id = 'D' WHERE question_id = ?", [qid["en:q_003"]]
        )
        wh.execute(
            "UPDATE question_choices SET text = (SELECT text FROM question_choices WHERE question_id = ? "
            "AND choice_id = 'A') WHERE question_id = ? AND choice_id = 'C'",
            [qid["en:q_002"]] * 2,
        )
        wh.execute(
            "UPDATE questions SET correct_choice_id = 'A' WHERE question_id = ?", [qid["zh:q_002"]]
        )
    ok = _gate(wh_path, "published", tmp_path)
    assert ok.status == "passed", [(o.expectation, o.failing_sample) for o in ok.failed]
    bad = _gate(wh_path, "broken", tmp_path)
    assert bad.status == "failed"
    (options,) = [o for o in bad.failed if o.suite == "distractor_validation"]
    assert {r["question_id"] for r in options.failing_sample} == {
        qid["en:q_001"],
        qid["en:q_002"],
        qid["en:q_003"],
        qid["zh:q_002"],
    }


# -- issue 12: --replace / --append, encodings, paths, nothing created on failure ------------------

from typer.testing import CliRunner  # noqa: E402

from clonemem.cli import app  # noqa: E402


def cli(*args: str):
    return CliRunner().invoke(app, [str(a) for a in args])


def test_existing_name_is_refused_unless_replace_or_append(tmp_path: Path) -> None:
    wh = tmp_path / "wh.duckdb"
    en, zh = (PUBLISHED / "100k" / f"zhou_min_benchmark_{lang}.json" for lang in ("en", "zh"))
    assert cli("--warehouse", wh, "import", "release", en, "--name", "X").exit_code == 0
    got = cli("--warehouse", wh, "import", "release", zh, "--name", "X")
    assert got.exit_code == 1
    assert (
        got.output.strip()
        == "error: benchmark 'X': already exists; add --replace to replace it or --append to add to it"
    )
    got = cli("--warehouse", wh, "import", "release", zh, "--name", "X", "--append")
    assert got.exit_code == 0, got.output
    assert "appended to benchmark 'X'" in got.output
    assert "this import: personas 1, traces 6, questions 2" in got.output
    assert "benchmark now: personas 2, traces 13, questions 6" in got.output
    got = cli("--warehouse", wh, "import", "release", zh, "--name", "X", "--append")
    assert got.exit_code == 1 and "person 'P07' (zh) is already in benchmark 'X'" in got.output
    got = cli(
        "--warehouse",
        wh,
        "import",
        "release",
        PUBLISHED / "500k" / "zhou_min_benchmark_zh.json",
        "--name",
        "X",
        "--replace",
    )
    assert got.exit_code == 0 and "replaced benchmark 'X'" in got.output
    with Warehouse.open_reader(wh) as r:
        assert r.rows("SELECT personas, traces, questions FROM v_benchmarks") == [(1, 12, 2)]
        assert (
            r.scalar("SELECT count(*) FROM traces") == 12
        )  # nothing of the replaced personas is left
    assert (
        cli(
            "--warehouse", wh, "import", "release", en, "--name", "X", "--replace", "--append"
        ).exit_code
        == 2
    )


def test_replace_is_atomic(wh: Warehouse, monkeypatch) -> None:
    import_files(wh, "release", [PUBLISHED / "100k"], "X")
    before = table_rows(wh)
    real_upsert = wh.upsert
    monkeypatch.setattr(
        wh,
        "upsert",
        lambda t, rows: (
            (_ for _ in ()).throw(RuntimeError("disk full"))
            if t == "questions"
            else real_upsert(t, rows)
        ),
    )
    with pytest.raises(RuntimeError):
        import_files(wh, "release", [PUBLISHED / "500k"], "X", mode="replace")
    monkeypatch.undo()
    assert table_rows(wh) == before


def test_utf8_bom_is_accepted(wh: Warehouse, tmp_path: Path, demo_file: Path) -> None:
    path = tmp_path / "bom.json"
    path.write_bytes(b"\xef\xbb\xbf" + demo_file.read_bytes())
    assert import_files(wh, "release", [path], "bom").questions == 6


@pytest.mark.parametrize(
    ("make", "words"),
    [
        (
            lambda p, doc: p.write_bytes(doc.encode("utf-8").replace(b"Lin Chen", b"Lin Ch\xe9n")),
            "not UTF-8 text (byte 0xe9",
        ),
        (lambda p, doc: p.write_text(doc, "utf-16"), "file is UTF-16 encoded; save it as UTF-8"),
        (lambda p, doc: p.mkdir(), "folder holds no *.json files"),
        (lambda p, doc: None, "no such file or folder"),
    ],
)
def test_bad_inputs_give_one_line_and_create_no_warehouse(
    tmp_path: Path, demo_file: Path, make, words
) -> None:
    path = tmp_path / "input.json"
    make(path, demo_file.read_text("utf-8"))
    wh = tmp_path / "fresh.duckdb"
    for command in (["import", "release"], ["import", "locomo"]):
        got = cli("--warehouse", wh, *command, path, "--name", "X")
        assert got.exit_code == 1
        assert got.output.count("\n") == 1 and got.output.startswith(f"error: {path}: $: "), (
            got.output
        )
        assert words in got.output
        assert not wh.exists() and not (tmp_path / "fresh.duckdb.wal").exists()


def test_failed_landing_into_a_new_warehouse_leaves_no_file(tmp_path: Path) -> None:
    wh = tmp_path / "fresh.duckdb"
    got = cli(
        "--warehouse", wh, "import", "release", PUBLISHED, "--name", "X"
    )  # 100k/ and 500k/: same persons
    assert got.exit_code == 1 and "import each under its own --name" in got.output
    assert not wh.exists()


def test_flow_imports_a_published_folder(tmp_path: Path) -> None:
    from clonemem.flows.imports import import_flow

    summary = import_flow(
        "release", [str(PUBLISHED / "100k")], "flowed", str(tmp_path / "wh.duckdb")
    )
    assert (summary.personas, summary.languages) == (2, {"en": 1, "zh": 1})
    with pytest.raises(ImportFailed, match="already exists"):
        import_flow("release", [str(PUBLISHED / "500k")], "flowed", str(tmp_path / "wh.duckdb"))
    again = import_flow(
        "release", [str(PUBLISHED / "500k")], "flowed", str(tmp_path / "wh.duckdb"), "replace"
    )
    assert (again.mode, again.total_traces) == ("replaced", 25)
