"""A LongMemEval-format file built from the two LoCoMo development conversations
(``benchmarks/locomo_to_longmemeval.py``) goes through import → evaluate (bm25, hybrid, oracle,
full_context) → export → import again: every system gets LongMemEval's rows (judged accuracy per type,
turn and session retrieval), the oracle ranks every evidence turn first, and the exported copy is
scored by the same protocol to the same figures.

Skipped when the development conversations are not on this machine (``CLONEMEM_LOCOMO_DEV``)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from benchmarks.locomo_to_longmemeval import convert
from clonemem.cli import app

DEV = Path(os.environ.get("CLONEMEM_LOCOMO_DEV", "/work/shared/data/locomo-dev"))
SYSTEMS = ("bm25", "hybrid", "oracle", "full_context")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.prefect,
    pytest.mark.timeout(1500),
    pytest.mark.skipif(not DEV.is_dir(), reason=f"no LoCoMo dev conversations at {DEV}"),
]

runner = CliRunner()


def cli(wh: Path, *args: str):
    got = runner.invoke(app, ["--warehouse", str(wh), *args])
    assert got.exit_code == 0, got.output
    return got


def _rows(path: Path) -> dict[tuple, dict]:
    rows = json.loads(path.read_text())["protocols"]
    return {(r["system"], r["group"], r.get("granularity"), r["k"]): r for r in rows}


def test_longmemeval_from_locomo_import_evaluate_export_and_back(tmp_path: Path) -> None:
    source = tmp_path / "longmemeval_locomo.json"
    instances = convert(sorted(DEV.glob("*.json")), source, per_conversation=6)
    assert instances == 12
    wh = tmp_path / "wh.duckdb"
    cli(wh, "import", "longmemeval", str(source), "--name", "lme-locomo")
    cli(
        wh,
        "evaluate",
        "lme-locomo",
        "--systems",
        ",".join(SYSTEMS),
        "--k",
        "10",
        "--force",
        "--json",
        str(tmp_path / "first.json"),
    )
    rows = _rows(tmp_path / "first.json")
    for system in SYSTEMS:
        assert rows[(system, "overall", None, 10)]["accuracy"] is not None
        assert rows[(system, "task_average", None, 10)]["n"] == 12
        for granularity, ks in (("turn", (5, 10, 50)), ("session", (5, 10))):
            for k in ks:
                assert {"recall_any", "recall_all", "ndcg_any"} <= set(
                    rows[(system, "overall", granularity, k)]
                )
    # the oracle retrieves the gold turns first: every evidence turn in the top 50, NDCG 1 at 50
    oracle = rows[("oracle", "overall", "turn", 50)]
    assert oracle["recall_all"] == 1.0 and oracle["ndcg_any"] == pytest.approx(1.0)
    # abstention (category 5) questions are left out of retrieval: fewer questions than in QA
    abstentions = rows.get(("oracle", "abstention", None, 10), {"n": 0})["n"]
    assert oracle["n"] == 12 - abstentions

    cli(wh, "export-release", "lme-locomo", "--out", str(tmp_path / "release"))
    cli(wh, "import", "release", str(tmp_path / "release"), "--name", "lme-locomo-copy")
    cli(
        wh,
        "evaluate",
        "lme-locomo-copy",
        "--systems",
        "oracle,bm25",
        "--k",
        "10",
        "--force",
        "--json",
        str(tmp_path / "copy.json"),
    )
    copy = _rows(tmp_path / "copy.json")
    for system in ("oracle", "bm25"):
        mine = {key[1:]: r for key, r in rows.items() if key[0] == system}
        again = {key[1:]: r for key, r in copy.items() if key[0] == system}
        assert again.keys() == mine.keys()
        for key, r in mine.items():
            for metric in ("accuracy", "recall_any", "recall_all", "ndcg_any"):
                assert again[key].get(metric) == pytest.approx(r.get(metric)), (system, key, metric)
