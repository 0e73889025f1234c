"""Release import/export (SPEC §6): acceptance, rejection with file and JSON path, round-trips."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from clonemem import release
from clonemem.warehouse import Warehouse
from tests.conftest import write_json

CONTENT_TABLES = ["benchmarks", "personas", "traces", "questions", "question_traces", "question_choices",
                  "question_evidence", "evidence", "evidence_traces"]


def table_rows(wh: Warehouse) -> dict[str, list]:
    out = {}
    for table in CONTENT_TABLES:
        cols = [r[0] for r in wh.rows(f"SELECT column_name FROM duckdb_columns() WHERE table_name = '{table}'")]
        out[table] = sorted(wh.rows(f"SELECT * FROM {table}"), key=lambda r: tuple(str(v) for v in r))
        assert cols
    return out


def test_import_counts_and_flags(wh: Warehouse, demo_file: Path) -> None:
    summary = release.import_release_files(wh, [demo_file], "demo")
    assert (summary.personas, summary.traces, summary.questions) == (1, 16, 6)
    assert summary.free_text_only == 2
    assert summary.unknown_question_types == {"self_reflection": 1}
    assert summary.evidence_without_traces == 1
    known = dict(wh.rows("SELECT external_id, question_type_known FROM questions"))
    assert known["q06"] is False and known["q01"] is True
    free = wh.rows("SELECT correct_choice_id, (SELECT count(*) FROM question_choices c WHERE c.question_id = q.question_id)"
                   " FROM questions q WHERE external_id = 'q03'")
    assert free == [(None, 0)]
    # context order is kept (the file's context is not sorted by date)
    order = [r[0] for r in wh.rows("SELECT external_id FROM traces ORDER BY seq")]
    assert order[:3] == ["t04", "t01", "t06"]


def test_round_trip_import_export_import(tmp_path: Path, demo_file: Path) -> None:
    with Warehouse.open_writer(tmp_path / "a.duckdb") as a:
        release.import_release_files(a, [demo_file], "bench")
        first = table_rows(a)
        files = release.export_release(a, "bench", tmp_path / "out")
    with Warehouse.open_writer(tmp_path / "b.duckdb") as b:
        release.import_release_files(b, files, "bench")
        second = table_rows(b)
        files2 = release.export_release(b, "bench", tmp_path / "out2")
    # config_json holds file names, equal here; every row is equal
    assert first == second
    exported = json.loads(files[0].read_text("utf-8"))
    original = json.loads(demo_file.read_text("utf-8"))
    original.pop("release_version")  # unknown field: ignored on import
    for q in original["questions"]:
        q.pop("notes", None)
    assert exported == original
    assert files2[0].read_text("utf-8") == files[0].read_text("utf-8")


def test_reimport_replaces_persona_rows(wh: Warehouse, tmp_path: Path, demo_doc: dict) -> None:
    release.import_release_files(wh, [write_json(tmp_path / "p.json", demo_doc)], "bench")
    smaller = copy.deepcopy(demo_doc)
    smaller["questions"] = smaller["questions"][:2]
    release.import_release_files(wh, [write_json(tmp_path / "p.json", smaller)], "bench", mode="replace")
    assert wh.scalar("SELECT count(*) FROM questions") == 2
    assert wh.scalar("SELECT count(*) FROM question_evidence") == 5  # q01 (2) + q02 (3), no leftovers
    assert wh.scalar("SELECT count(*) FROM personas") == 1


def test_any_medium_and_timezones_accepted(wh: Warehouse, tmp_path: Path, demo_doc: dict) -> None:
    doc = copy.deepcopy(demo_doc)
    doc["context"][0]["medium"] = "voice_note"
    doc["context"][0]["event_date"] = "2023-02-14T09:30:00+02:00"
    release.import_release_files(wh, [write_json(tmp_path / "p.json", doc)], "bench")
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
        (lambda d: d["questions"][2]["evidence"][1]["digital_trace_ids"].append("t99"),
         "$.questions[2].evidence[1].digital_trace_ids[1]", "'t99'"),
        (lambda d: d["context"][4].__setitem__("id", 17), "$.context[4].id", "string"),
        (lambda d: d["questions"][0].__setitem__("id", 5), "$.questions[0].id", "string"),
        (lambda d: d["questions"][1]["digital_trace_ids"].append("nope"), "$.questions[1].digital_trace_ids[3]", "not in context"),
        (lambda d: d["context"][5].__setitem__("id", "t04"), "$.context[5].id", "duplicate trace id"),
        (lambda d: d["questions"][0].__setitem__("correct_choice_id", "Z"), "$.questions[0].correct_choice_id", "not one of"),
        (lambda d: d["questions"][2].__setitem__("correct_choice_id", "A"), "$.questions[2].correct_choice_id", "choices is empty"),
        (lambda d: d["context"][1].__setitem__("event_date", "yesterday"), "$.context[1].event_date", "datetime"),
    ],
)
def test_malformed_files_rejected_with_path(wh: Warehouse, tmp_path: Path, demo_doc: dict, mutate, path, words) -> None:
    bad = write_json(tmp_path / "bad.json", _broken(demo_doc, mutate))
    with pytest.raises(release.ReleaseError) as err:
        release.import_release_files(wh, [bad], "bench")
    text = str(err.value)
    assert f"{bad}: {path}:" in text
    assert words in text
    assert wh.scalar("SELECT count(*) FROM traces") == 0
    assert wh.scalar("SELECT count(*) FROM benchmarks") == 0


def test_bad_json_names_file_and_position(wh: Warehouse, tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"person_name": "x", "person_id": "p", "context": [}', "utf-8")
    with pytest.raises(release.ReleaseError) as err:
        release.import_release_files(wh, [bad], "bench")
    assert str(err.value).startswith(f"{bad}: $: not valid JSON")
    assert "column" in str(err.value)


def test_one_bad_file_loads_nothing_from_any(wh: Warehouse, tmp_path: Path, demo_doc: dict) -> None:
    good = write_json(tmp_path / "good.json", demo_doc)
    other = copy.deepcopy(demo_doc)
    other["person_id"] = "someone_else"
    other["questions"][0]["evidence"][0]["digital_trace_ids"] = ["missing"]
    bad = write_json(tmp_path / "bad.json", other)
    with pytest.raises(release.ReleaseError):
        release.import_release_files(wh, [good, bad], "bench")
    assert wh.scalar("SELECT count(*) FROM personas") == 0


def test_duplicate_person_across_files(wh: Warehouse, tmp_path: Path, demo_doc: dict) -> None:
    a = write_json(tmp_path / "a.json", demo_doc)
    b = write_json(tmp_path / "b.json", demo_doc)
    with pytest.raises(release.ReleaseError, match=r"b.json: \$.person_id: person 'lin_chen' is also in"):
        release.import_release_files(wh, [a, b], "bench")


def test_failure_inside_the_transaction_rolls_back(wh: Warehouse, demo_file: Path, monkeypatch) -> None:
    release.import_release_files(wh, [demo_file], "bench")
    before = table_rows(wh)

    def explode(*args, **kwargs):
        raise RuntimeError("disk full")

    real_upsert = wh.upsert
    monkeypatch.setattr(wh, "upsert", lambda t, rows: explode() if t == "questions" else real_upsert(t, rows))
    with pytest.raises(RuntimeError):
        release.import_release_files(wh, [demo_file], "bench", mode="replace")
    monkeypatch.undo()
    assert table_rows(wh) == before


def test_export_unknown_benchmark(wh: Warehouse, tmp_path: Path) -> None:
    with pytest.raises(release.UnknownBenchmark, match="no benchmark 'nope'"):
        release.export_release(wh, "nope", tmp_path)


def test_export_by_id_or_name(wh: Warehouse, demo_file: Path, tmp_path: Path) -> None:
    summary = release.import_release_files(wh, [demo_file], "bench")
    by_id = release.export_release(wh, summary.benchmark_id, tmp_path / "a")
    by_name = release.export_release(wh, "bench", tmp_path / "b")
    assert by_id[0].read_bytes() == by_name[0].read_bytes()
