"""Predictions made by another harness (``evaluate --predictions FILE --format F``): read in the
benchmarks' own layouts and mapped to the benchmark's ids before anything runs; every problem is one
line naming the file, the line or JSON path, and the field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clonemem.evaluation.predictions import read_predictions
from clonemem.importers import import_files
from clonemem.schemas.results_file import ResultsFileError
from clonemem.warehouse import Warehouse

MINI = Path(__file__).parent / "fixtures" / "locomo" / "conv-mini.json"


@pytest.fixture()
def mini(wh: Warehouse) -> tuple[Warehouse, str]:
    import_files(wh, "locomo", [MINI], "mini")
    ((bid,),) = wh.rows("SELECT benchmark_id FROM benchmarks WHERE name = 'mini'")
    return wh, bid


KEY = "gpt-4_prediction"


def _locomo_file(
    tmp_path: Path, without: int | None = None, context: list[str] | None = None
) -> Path:
    """The mini conversation with a prediction under KEY on every qa item (but ``without``), and the
    first item's retrieved context."""
    doc = json.loads(MINI.read_text())
    doc["sample_id"] = "conv-mini"
    for i, qa in enumerate(doc["qa"]):
        if i != without:
            qa[KEY] = f"prediction {i}"
    doc["qa"][0][f"{KEY}_context"] = context or ["D1:1", "S2"]
    out = tmp_path / "predictions.json"
    out.write_text(json.dumps([doc]))
    return out


def _ids(wh: Warehouse, kind: str) -> dict[str, str]:
    table = "questions" if kind == "q" else "traces"
    key = "question_id" if kind == "q" else "trace_id"
    return dict(wh.rows(f"SELECT external_id, {key} FROM {table}"))


def test_locomo_layout_gives_each_question_its_prediction_and_context(mini, tmp_path: Path) -> None:
    wh, bid = mini
    resolved = read_predictions(wh, bid, _locomo_file(tmp_path), "locomo", key=KEY)
    questions, traces = _ids(wh, "q"), _ids(wh, "t")
    (lines,) = resolved.by_persona.values()
    first = lines[questions["conv-mini:q0"]]
    assert first.given.answer == "prediction 0"
    # D1:1, then session 2's turns in order (S2 stands for the whole session)
    session_2 = sorted(
        (e for e in traces if e.startswith("conv-mini:D2:")), key=lambda e: int(e.rsplit(":", 1)[1])
    )
    assert [i.trace_ids[0] for i in first.items] == [
        traces["conv-mini:D1:1"],
        *(traces[e] for e in session_2),
    ]
    assert lines[questions["conv-mini:q3"]].items == ()
    assert resolved.missing == () and resolved.sha256


def test_locomo_layout_needs_its_key_and_names_a_missing_prediction(mini, tmp_path: Path) -> None:
    wh, bid = mini
    path = _locomo_file(tmp_path, without=2)
    with pytest.raises(
        ResultsFileError, match=r"predictions\.json: \$\[0\]\.qa\[2\]\.gpt-4_prediction: missing"
    ):
        read_predictions(wh, bid, path, "locomo", key=KEY)
    resolved = read_predictions(wh, bid, path, "locomo", key=KEY, allow_missing=True)
    assert resolved.missing == ("conv-mini:q2",)
    with pytest.raises(ResultsFileError, match="needs --key"):
        read_predictions(wh, bid, path, "locomo")


def test_locomo_layout_unknown_turn_is_named_with_its_path(mini, tmp_path: Path) -> None:
    wh, bid = mini
    path = _locomo_file(tmp_path, context=["D1:1", "D7:7"])
    with pytest.raises(
        ResultsFileError,
        match=r"\$\[0\]\.qa\[0\]: \$\[0\]\.qa\[0\]\.gpt-4_prediction_context\[1\]: unknown turn",
    ):
        read_predictions(wh, bid, path, "locomo", key=KEY)


def _lines(tmp_path: Path, *lines: object) -> Path:
    out = tmp_path / "hyp.jsonl"
    out.write_text("\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines) + "\n")
    return out


def test_longmemeval_lines_map_question_ids_and_retrieval_logs(mini, tmp_path: Path) -> None:
    wh, bid = mini
    ids = [f"conv-mini:q{i}" for i in range(7)]
    path = _lines(
        tmp_path,
        *({"question_id": q, "hypothesis": f"h{q}"} for q in ids[1:]),
        {
            "question_id": ids[0],
            "hypothesis": "h0",
            "retrieval_results": {
                "ranked_items": [{"corpus_id": "conv-mini:D2:1"}, {"corpus_id": "conv-mini:S1"}]
            },
        },
    )
    resolved = read_predictions(wh, bid, path, "longmemeval")
    questions, traces = _ids(wh, "q"), _ids(wh, "t")
    (lines,) = resolved.by_persona.values()
    assert lines[questions[ids[0]]].given.answer == "h0"
    assert lines[questions[ids[0]]].items[0].trace_ids == (traces["conv-mini:D2:1"],)
    assert len(lines[questions[ids[0]]].items) == 1 + sum(
        e.startswith("conv-mini:D1:") for e in traces
    )


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (
            [
                '{"question_id": "conv-mini:q0", "hypothesis": "a"}',
                '{"question_id": "conv-mini:q1"}',
            ],
            r"hyp\.jsonl: line 2: \$\.hypothesis: required field is missing",
        ),
        (
            ['{"question_id": "nope", "hypothesis": "a"}'],
            r"hyp\.jsonl: line 1: \$\.question_id: unknown question id 'nope'",
        ),
        (
            ['{"question_id": "conv-mini:q0", "hypothesis": 3}'],
            r"line 1: \$\.hypothesis: Input should be a valid string",
        ),
        (["{not json"], r"line 1: not JSON"),
        (
            ['{"question_id": "conv-mini:q0", "hypothesis": "a"}'],
            r"hyp\.jsonl: 6 of the benchmark's 7 questions have no prediction "
            r"\(first: 'conv-mini:q1'\)",
        ),
        (
            [
                '{"question_id": "conv-mini:q0", "hypothesis": "a", '
                '"retrieval_results": {"ranked_items": [{"corpus_id": "x_1"}]}}'
            ],
            r"line 1: \$\.retrieval_results\.ranked_items\[0\]\.corpus_id: "
            r"unknown turn or session id 'x_1'",
        ),
    ],
)
def test_longmemeval_problems_name_file_line_and_field(
    mini, tmp_path: Path, lines: list[str], message: str
) -> None:
    wh, bid = mini
    with pytest.raises(ResultsFileError, match=message):
        read_predictions(wh, bid, _lines(tmp_path, *lines), "longmemeval")


def test_an_unknown_format_is_named(mini, tmp_path: Path) -> None:
    wh, bid = mini
    with pytest.raises(ResultsFileError, match="unknown predictions format 'csv'"):
        read_predictions(wh, bid, _lines(tmp_path, "{}"), "csv")
