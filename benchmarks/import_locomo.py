"""Import speed of LoCoMo conversations, in both published layouts. Prints JSON.

Imports the given per-conversation files or folders (default: the development conversations beside the
repository, ``../shared/data/locomo-dev``), then the same conversations wrapped as one ``locomo10.json``
list, each into a fresh warehouse; reports counts, seconds and the evidence-reference repairs.

    python benchmarks/import_locomo.py [PATH ...] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from clonemem.importers.base import ImportSummary, expand_paths, load_personas
from clonemem.importers.locomo import parse_locomo_paths
from clonemem.warehouse import Warehouse

DEFAULT_DEV = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo-dev"


def wrap_as_locomo10(files: list[Path], out: Path) -> Path:
    """The combined layout: a list of samples with sample_id, conversation and qa (files already combined pass)."""
    samples = []
    for f in files:
        doc = json.loads(f.read_text("utf-8-sig"))
        if isinstance(doc, list):
            samples.extend(doc)
            continue
        samples.append(
            {
                "sample_id": f.stem,
                "conversation": {k: v for k, v in doc.items() if k != "qa"},
                "qa": doc.get("qa", []),
            }
        )
    out.write_text(json.dumps(samples, ensure_ascii=False), "utf-8")
    return out


def timed_import(paths: list[Path], warehouse: Path) -> tuple[ImportSummary, float, float]:
    t0 = time.perf_counter()
    personas = parse_locomo_paths(paths)
    t1 = time.perf_counter()
    with Warehouse.open_writer(warehouse) as wh:
        t2 = time.perf_counter()
        summary = load_personas(wh, personas, "locomo")
        t3 = time.perf_counter()
    return summary, t1 - t0, t3 - t2


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", type=Path, default=[DEFAULT_DEV])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    files = expand_paths(args.paths)
    out: dict = {"benchmark": "import_locomo", "files": [f.name for f in files]}
    with tempfile.TemporaryDirectory() as tmp:
        combined = wrap_as_locomo10(files, Path(tmp) / "locomo10.json")
        for layout, paths in (("per_conversation", files), ("locomo10", [combined])):
            runs = [
                timed_import(paths, Path(tmp) / f"{layout}-{r}.duckdb") for r in range(args.repeat)
            ]
            summary = runs[0][0]
            best = min(runs, key=lambda r: r[1] + r[2])
            out[layout] = {
                "conversations": summary.personas,
                "traces": summary.traces,
                "questions": summary.questions,
                "questions_by_category": _by_category(summary, Path(tmp) / f"{layout}-0.duckdb"),
                "questions_without_evidence": summary.questions_without_evidence,
                "evidence_references": summary.note_counts,
                "parse_seconds": round(best[1], 3),
                "load_seconds": round(best[2], 3),
                "import_seconds_best": round(best[1] + best[2], 3),
                "import_seconds_worst": round(max(r[1] + r[2] for r in runs), 3),
            }
    out["same_counts_in_both_layouts"] = all(
        out["per_conversation"][k] == out["locomo10"][k]
        for k in ("conversations", "traces", "questions")
    )
    print(json.dumps(out, indent=2))


def _by_category(summary: ImportSummary, warehouse: Path) -> dict[str, int]:
    with Warehouse.open_reader(warehouse) as wh:
        return {
            f"{c} {label}": n
            for c, label, n in wh.rows(
                "SELECT source_category, source_question_type, count(*) FROM questions WHERE benchmark_id = ? "
                "GROUP BY ALL ORDER BY 1",
                [summary.benchmark_id],
            )
        }


if __name__ == "__main__":
    main()
