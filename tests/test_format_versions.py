"""Every written format carries `format_version` ("MAJOR.MINOR"); readers accept their major version at
any minor and documents without the field (written before versions), and refuse any other major version
with one line naming the document and the version (schemas/versions.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clonemem.evaluation import results_file as rf
from clonemem.importers import importer
from clonemem.importers.base import ImportFailed
from clonemem.schemas.gym import Bounds, GymReport
from clonemem.schemas.results import EvaluationResult
from clonemem.schemas.results_file import ResultsFileError
from clonemem.schemas.versions import (
    EVALUATION,
    FIELD,
    GYM,
    RELEASE,
    RESULTS_FILE,
    Format,
    FormatError,
    FormatVersionError,
)

PUBLISHED = Path(__file__).parent / "fixtures" / "published" / "100k"
ONE_LINE = {"question_id": "q1", "items": [{"trace_ids": ["t1"], "text": "x"}]}


def test_a_reader_takes_its_major_at_any_minor_and_refuses_other_majors() -> None:
    fmt = Format("toy", "1.2")
    assert [fmt.problem(v) for v in (None, "1.0", "1.2", "1.9")] == [None] * 4
    assert (
        fmt.problem("2.0")
        == "toy format_version 2.0 is not supported: this clonemem reads toy 1.x (it writes 1.2)"
    )
    assert fmt.problem("0.9") is not None
    assert fmt.problem("1") == 'format_version "1" is not MAJOR.MINOR (this clonemem writes 1.2)'
    assert fmt.problem(2) == "format_version 2 is not MAJOR.MINOR (this clonemem writes 1.2)"
    with pytest.raises(
        FormatVersionError, match=r"^doc.json: toy format_version 3.1 is not supported"
    ):
        fmt.check("3.1", "doc.json")


@pytest.mark.parametrize("fmt", [RELEASE, RESULTS_FILE, EVALUATION, GYM], ids=lambda f: f.name)
def test_every_format_writes_a_major_minor_version(fmt: Format) -> None:
    assert fmt.problem(fmt.version) is None and fmt.version.count(".") == 1


# -- release files ---------------------------------------------------------------------------------


def published(tmp_path: Path, version: object = None, **changes: object) -> Path:
    doc = json.loads(next(PUBLISHED.glob("*.json")).read_text("utf-8"))
    assert FIELD not in doc  # the published files predate versions
    if version is not None:
        doc = {FIELD: version, **doc}
    doc.update(changes)
    path = tmp_path / "persona.json"
    path.write_text(json.dumps(doc, ensure_ascii=False), "utf-8")
    return path


def test_release_files_without_a_version_or_of_a_later_minor_are_read(tmp_path: Path) -> None:
    release = importer("release")
    assert release.parse_file(published(tmp_path))[0].release.format_version is None
    assert release.parse_file(published(tmp_path, "1.4"))[0].release.format_version == "1.4"


def test_a_release_file_of_another_major_is_refused_in_one_line(tmp_path: Path) -> None:
    path = published(tmp_path, "2.0")
    with pytest.raises(ImportFailed) as failed:
        importer("release").parse_file(path)
    assert str(failed.value) == (
        f"{path}: $.format_version: release file format_version 2.0 is not supported: "
        "this clonemem reads release file 1.x (it writes 1.0)"
    )
    # a version-2 file whose fields changed too: the version is the one problem named
    changed = published(tmp_path, "2.0", context="moved to traces.jsonl")
    with pytest.raises(ImportFailed) as failed:
        importer("release").parse_file(changed)
    assert len(failed.value.problems) == 1 and "format_version 2.0" in str(failed.value)


def test_the_exporter_writes_the_version(wh, tmp_path: Path) -> None:
    from clonemem.exporters.release import export_release
    from clonemem.importers import import_files

    import_files(wh, "release", [PUBLISHED], "published")
    [first, *_] = export_release(wh, "published", tmp_path / "out")
    assert json.loads(first.read_text("utf-8"))[FIELD] == RELEASE.version


# -- results files ---------------------------------------------------------------------------------


def lines_file(tmp_path: Path, *lines: dict) -> Path:
    path = tmp_path / "results.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), "utf-8")
    return path


def test_results_files_without_a_version_or_of_a_later_minor_are_read(tmp_path: Path) -> None:
    read = rf.read_results_file(
        lines_file(tmp_path, ONE_LINE, {FIELD: "1.3", **ONE_LINE, "question_id": "q2"})
    )
    assert [line.question_id for _, line in read.lines] == ["q1", "q2"]


def test_a_results_file_of_another_major_is_refused_in_one_line(tmp_path: Path) -> None:
    path = lines_file(tmp_path, ONE_LINE, {FIELD: "2.0", "question": "q2", "retrieved": []})
    with pytest.raises(ResultsFileError) as failed:
        rf.read_results_file(path)
    assert str(failed.value) == (
        f"{path}: line 2: $.format_version: results file format_version 2.0 is not "
        "supported: this clonemem reads results file 1.x (it writes 1.0)"
    )


def test_export_retrievals_writes_the_version_on_every_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        rf, "retrieval_lines", lambda wh, ref, system, k: ("e1", "bm25", 5, [ONE_LINE, ONE_LINE])
    )
    out = rf.export_retrievals(None, "e1", tmp_path / "out.jsonl")  # type: ignore[arg-type]  # no warehouse read
    written = [json.loads(line) for line in out.path.read_text("utf-8").splitlines()]
    assert [line[FIELD] for line in written] == [RESULTS_FILE.version] * 2
    assert len(rf.read_results_file(out.path).lines) == 2


# -- evaluate --json and gym --json ----------------------------------------------------------------


def evaluation() -> EvaluationResult:
    return EvaluationResult(
        benchmark="b",
        benchmark_id="b1",
        eval_run_id="e1",
        offline=True,
        results=[],
        by_question_type=[],
    )


def gym_report() -> GymReport:
    return GymReport(
        results=[], bounds=Bounds(random=0.2, upper=1.0), rank_change=[], exposure_rate=1.0
    )


@pytest.mark.parametrize(
    ("fmt", "make"), [(EVALUATION, evaluation), (GYM, gym_report)], ids=["evaluate", "gym"]
)
def test_json_results_carry_the_version_and_readers_check_it(
    fmt: Format, make, tmp_path: Path
) -> None:
    doc = make().model_dump(mode="json")
    assert doc[FIELD] == fmt.version
    path = tmp_path / "result.json"
    path.write_text(
        json.dumps({k: v for k, v in doc.items() if k != FIELD}), "utf-8"
    )  # written before versions
    assert fmt.read(path, type(make())) == make()
    path.write_text(json.dumps({**doc, FIELD: "2.1"}), "utf-8")
    with pytest.raises(
        FormatVersionError, match=rf"^{path}: {fmt.name} format_version 2.1 is not supported"
    ):
        fmt.read(path, type(make()))
    path.write_text("{", "utf-8")
    with pytest.raises(FormatError, match=rf"^{path}: cannot read the {fmt.name}"):
        fmt.read(path, type(make()))
