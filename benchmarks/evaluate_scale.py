"""Evaluation throughput end to end (issue: speed), offline. Prints JSON.

Builds an imported benchmark of conversational text big enough to matter, in one of two ways:

- ``--data distinct`` (default): ``--conversations`` (8) conversations that share no turn text, derived
  from the two LoCoMo development conversations (``benchmarks/locomo_distinct.py`` says how: sessions
  of both recombined, speakers renamed, years shifted, everyday words reworded, questions kept with the
  turns they cite). About 5,100 traces and 1,700 questions, the size of LoCoMo's eight held-out
  conversations (5,094 turns, 1,679 questions) — but NOT those conversations, which this machine lacks.
  Written as one file in LoCoMo's release layout (``locomo10.json``) and imported with
  ``clonemem import locomo``, as a user imports LoCoMo's release.
- ``--data copies``: each development conversation imported ``--copies`` times under its own sample id
  (7 copies: 5,516 traces, 2,128 questions). Identical texts: caches keyed on text hide work.

Then times `clonemem evaluate BENCH --systems S --k K --force` as a user's first evaluation runs it: a
fresh process with a NEW Prefect home (Prefect's start and its database's creation included) and a new
embedding cache, ``--repeat`` times, each with its wall time and peak RSS (``ru_maxrss`` of that process,
from ``wait4``); then a re-run on the last home, served from Prefect's cache (no LLM call); and, with
``--embeddings-on-disk``, a run with a new Prefect home but the first run's embeddings on disk (every
task runs again, as after a change to the systems' code).

    python benchmarks/evaluate_scale.py [--data distinct|copies] [--repeat 3] [--sets bm25,random all]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: the repository's root is where `benchmarks` is
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.locomo_distinct import DEV, write_release

EXE = str(Path(sys.executable).with_name("clonemem"))


def replicate(copies: int, out: Path) -> list[Path]:
    """Each development conversation ``copies`` times, as files of their own (distinct sample ids)."""
    files = []
    for src in sorted(DEV.glob("*.json")):
        doc = json.loads(src.read_text("utf-8"))
        for i in range(copies):
            path = out / f"{src.stem}-copy{i}.json"
            path.write_text(json.dumps(doc, ensure_ascii=False), "utf-8")
            files.append(path)
    return files


def run(args: list[str], env: dict[str, str]) -> tuple[subprocess.CompletedProcess, float, float]:
    """A command in a fresh process: (result, wall seconds, its peak RSS in MB, from wait4 of that process)."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen([EXE, *args], env=env, stdout=out, stderr=err, text=True)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        done = subprocess.CompletedProcess(proc.args, proc.returncode, out.read(), err.read())
    return done, wall, usage.ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", choices=("distinct", "copies"), default="distinct")
    parser.add_argument("--conversations", type=int, default=8, help="with --data distinct")
    parser.add_argument("--copies", type=int, default=7, help="with --data copies")
    parser.add_argument(
        "--repeat", type=int, default=3, help="first runs (each with a new Prefect home)"
    )
    parser.add_argument(
        "--embeddings-on-disk",
        action="store_true",
        help="also a run with a new Prefect home and the first run's embeddings on disk",
    )
    parser.add_argument(
        "--sets",
        nargs="+",
        default=["bm25,random"],
        help="system sets to time, comma-separated names or 'all'",
    )
    parser.add_argument("--k", default="5,10", help="k for the named sets")
    parser.add_argument("--k-all", default="10", help="k for the 'all' set")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="clonemem-evalscale-") as tmp:
        tmp_path = Path(tmp)
        base = {**os.environ, "CLONEMEM_WAREHOUSE": str(tmp_path / "wh.duckdb")}
        (tmp_path / "files").mkdir()
        if args.data == "distinct":
            files = [write_release(args.conversations, tmp_path / "files")]
        else:
            files = replicate(args.copies, tmp_path / "files")
        got, import_s, _ = run(
            ["import", "locomo", *map(str, files), "--name", "scale"],
            {**base, "PREFECT_HOME": str(tmp_path / "home-import")},
        )
        if got.returncode:
            sys.exit(got.stderr)
        sizes = subprocess.run(
            [EXE, "benchmarks", "--json"], env=base, capture_output=True, text=True
        )
        bench = json.loads(sizes.stdout)[0]
        out = {
            "benchmark": "evaluate_scale",
            "data": args.data,
            "personas": bench.get("personas"),
            "traces": bench["traces"],
            "questions": bench["questions"],
            "import_s": round(import_s, 2),
            "runs": [],
        }
        for spec in args.sets:
            if spec == "all":
                listed = subprocess.run(
                    [EXE, "systems", "--json"], env=base, capture_output=True, text=True
                )
                systems, ks = ",".join(json.loads(listed.stdout)), args.k_all
            else:
                systems, ks = spec, args.k
            tag = spec.replace(",", "-")
            attempts = [
                (f"first #{r + 1} (new Prefect home)", f"home-{tag}-{r}", f"emb-{tag}-{r}")
                for r in range(args.repeat)
            ]
            last = attempts[-1]
            attempts.append(("re-run (same Prefect home)", last[1], last[2]))
            if args.embeddings_on_disk:
                attempts.append(
                    ("new Prefect home, embeddings on disk", f"home-{tag}-disk", last[2])
                )
            for n, (attempt, home, emb) in enumerate(attempts):
                env = {
                    **base,
                    "PREFECT_HOME": str(tmp_path / home),
                    "CLONEMEM_EMBED_CACHE": str(tmp_path / f"{emb}.sqlite3"),
                }
                report = tmp_path / f"{tag}-{n}.json"
                got, wall, rss = run(
                    [
                        "evaluate",
                        "scale",
                        "--systems",
                        systems,
                        "--k",
                        ks,
                        "--force",
                        "--json",
                        str(report),
                    ],
                    env,
                )
                if got.returncode:
                    sys.exit(got.stderr)
                result = json.loads(report.read_text("utf-8"))
                ledger = subprocess.run(
                    [EXE, "sql", "SELECT count(*) AS n FROM llm_calls", "--format", "json"],
                    env=base,
                    capture_output=True,
                    text=True,
                )
                out["runs"].append(
                    {
                        "systems": spec,
                        "k": ks,
                        "attempt": attempt,
                        "wall_s": round(wall, 2),
                        "peak_rss_mb": round(rss),
                        "ledger_llm_calls_after": json.loads(ledger.stdout)[0]["n"],
                        "per_system": {
                            r["system"]: {
                                "build_s": round(r["build_seconds"], 2),
                                "p50_ms": r["retrieval_p50_ms"],
                                "p95_ms": r["retrieval_p95_ms"],
                                "recall_flat": r["recall_flat"],
                                "llm_calls": r["llm_calls"],
                            }
                            for r in result["results"]
                        },
                    }
                )
                print(json.dumps(out["runs"][-1]), file=sys.stderr, flush=True)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
