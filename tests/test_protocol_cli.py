"""`clonemem evaluate BENCH --predictions FILE --format longmemeval --name NAME` on a LongMemEval
benchmark: the hypotheses are judged by LongMemEval's rules (offline judge), the retrieval log is
scored at turn and session level with LongMemEval's session conversion (renamed ``noans`` turns
included), the abstention question is left out of retrieval, and ``--json`` carries the rows; a bad
file is one error line naming the file, line and field, exit 1, and nothing stored."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from clonemem.cli import app
from clonemem.warehouse import Warehouse

pytestmark = pytest.mark.prefect

runner = CliRunner()


def _turns(*texts: str, answer: int | None = None) -> list[dict]:
    return [
        {"role": "user" if i % 2 == 0 else "assistant", "content": t, "has_answer": i == answer}
        for i, t in enumerate(texts)
    ]


HAYSTACK = {
    "haystack_session_ids": ["s_a", "answer_x_1", "s_b"],
    "haystack_dates": [
        "2023/06/01 (Thu) 09:00",
        "2023/06/05 (Mon) 09:00",
        "2023/06/07 (Wed) 09:00",
    ],
    "haystack_sessions": [
        _turns("I repainted the kitchen.", "Nice colour choice."),
        _turns("I started the pottery course on Monday.", "Enjoy the course!", answer=0),
        _turns("My sister visits next week.", "Have fun."),
    ],
}
INSTANCES = [
    {
        "question_id": "q1",
        "question_type": "temporal-reasoning",
        "question": "How many days ago did I start pottery?",
        "answer": "5 days",
        "question_date": "2023/06/10 (Sat) 10:00",
        "answer_session_ids": ["answer_x_1"],
        **HAYSTACK,
    },
    {
        "question_id": "q2_abs",
        "question_type": "multi-session",
        "question": "Where did my sister study?",
        "answer": "You never said where your sister studied.",
        "question_date": "2023/06/10 (Sat) 10:00",
        "answer_session_ids": [],
        **HAYSTACK,
    },
]


def cli(wh: Path, *args: str):
    return runner.invoke(app, ["--warehouse", str(wh), *args])


@pytest.fixture(scope="module")
def lme(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("lme")
    source = folder / "longmemeval_tiny.json"
    source.write_text(json.dumps(INSTANCES))
    wh = folder / "wh.duckdb"
    got = cli(wh, "import", "longmemeval", str(source), "--name", "lme")
    assert got.exit_code == 0, got.output
    return wh


def _hypotheses(path: Path, *lines: object) -> Path:
    path.write_text("".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines))
    return path


def test_predictions_are_scored_by_longmemevals_rules(lme: Path, tmp_path: Path) -> None:
    ranked = [{"corpus_id": c} for c in ("s_a_1", "noans_x_1_2", "answer_x_1_1", "s_b_1")]
    hyp = _hypotheses(
        tmp_path / "hyp.jsonl",
        {
            "question_id": "q1",
            "hypothesis": "You started 6 days ago.",
            "retrieval_results": {"ranked_items": ranked},
        },
        {"question_id": "q2_abs", "hypothesis": "She studied in Paris."},
    )
    got = cli(
        lme,
        "evaluate",
        "lme",
        "--predictions",
        str(hyp),
        "--format",
        "longmemeval",
        "--name",
        "ext",
        "--force",
        "--json",
        str(tmp_path / "out.json"),
    )
    assert got.exit_code == 0, got.output
    assert "standard protocols" in got.output
    rows = {
        (r["group"], r.get("granularity"), r["k"]): r
        for r in json.loads((tmp_path / "out.json").read_text())["protocols"]
    }
    qa_k = next(k for g, gran, k in rows if gran is None)
    # q1: 6 days for 5 (off by one: yes); q2_abs: names a place instead of abstaining (no)
    assert rows[("overall", None, qa_k)]["accuracy"] == 0.5
    assert rows[("temporal-reasoning", None, qa_k)]["accuracy"] == 1.0
    assert rows[("abstention", None, qa_k)]["accuracy"] == 0.0
    assert rows[("non_abstention", None, qa_k)]["accuracy"] == 1.0
    assert rows[("task_average", None, qa_k)]["accuracy"] == 0.5  # (1 + 0) / 2 over the two types
    # retrieval, q1 only (the abstention question is left out): the evidence turn answer_x_1_1 is
    # 3rd
    # turn level at 5: DCG 1/log2(3), ideal 1 (one evidence turn)
    turn = rows[("overall", "turn", 5)]
    assert turn["n"] == 1 and turn["recall_all"] == 1.0
    assert turn["ndcg_any"] == pytest.approx(1 / math.log2(3))
    # session level at 5: s_a, x' (the renamed noans turn stands for another session), x, s_b: 4
    # sessions
    # < 5, k grows past the ranking; x is 3rd -> 1/log2(3) (without the renaming x would be 2nd:
    # 1.0)
    session = rows[("overall", "session", 5)]
    assert session["ndcg_any"] == pytest.approx(1 / math.log2(3))
    assert ("multi-session", "turn", 5) not in rows


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (
            ['{"question_id": "q1", "hypothesis": "x"}', '{"question_id": "q2_abs"}'],
            r"hyp\.jsonl: line 2: \$\.hypothesis: required field is missing; nothing was stored",
        ),
        (
            ['{"question_id": "q9", "hypothesis": "x"}'],
            r"hyp\.jsonl: line 1: \$\.question_id: unknown question id 'q9'",
        ),
        (
            ['{"question_id": "q1", "hypothesis": "x"}'],
            r"hyp\.jsonl: 1 of the benchmark's 2 questions have no prediction",
        ),
    ],
)
def test_a_bad_predictions_file_is_one_error_line_and_stores_nothing(
    lme: Path, tmp_path: Path, lines: list[str], message: str
) -> None:
    with Warehouse.open_reader(lme) as wh:
        before = wh.scalar("SELECT count(*) FROM eval_runs")
    got = cli(
        lme,
        "evaluate",
        "lme",
        "--predictions",
        str(_hypotheses(tmp_path / "hyp.jsonl", *lines)),
        "--format",
        "longmemeval",
        "--name",
        "bad",
        "--force",
    )
    errors = [line for line in got.output.splitlines() if line.startswith("error:")]
    assert got.exit_code == 1 and len(errors) == 1, got.output
    assert re.search(message, errors[0]), errors[0]
    with Warehouse.open_reader(lme) as wh:
        assert wh.scalar("SELECT count(*) FROM eval_runs") == before


def test_predictions_flags_go_together(lme: Path, tmp_path: Path) -> None:
    got = cli(lme, "evaluate", "lme", "--predictions", str(tmp_path / "x.jsonl"), "--name", "n")
    assert got.exit_code == 2 and "--format" in got.output
    got = cli(
        lme,
        "evaluate",
        "lme",
        "--predictions",
        str(tmp_path / "x.json"),
        "--format",
        "locomo",
        "--name",
        "n",
    )
    assert got.exit_code == 2 and "--key" in got.output
