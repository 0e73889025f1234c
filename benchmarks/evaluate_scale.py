"""Evaluation throughput end to end (issue: speed), offline. Prints JSON.

Builds an imported benchmark of real conversational text big enough to matter: the LoCoMo development
conversations (``../shared/data/locomo-dev``), each imported ``--copies`` times under its own sample id
(7 copies: 5,516 traces, 2,128 questions), then times `clonemem evaluate` as a user runs it (a fresh
process: Prefect's start included) for each system set, with its peak RSS; a second time to show the
re-run is served from the cache (no LLM call); and a third time with a new Prefect home, where every
task runs again (as after a change to the systems' code) but the first run's embeddings are on disk.

    python benchmarks/evaluate_scale.py [--copies 7] [--sets bm25,random all]
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

DEV = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo-dev"
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
    parser.add_argument("--copies", type=int, default=7)
    parser.add_argument("--sets", nargs="+", default=["bm25,random", "all"],
                        help="system sets to time, comma-separated names or 'all'")
    parser.add_argument("--k-all", default="10", help="k for the 'all' set")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="clonemem-evalscale-") as tmp:
        tmp_path = Path(tmp)
        # a new embedding cache too: the first run embeds everything, as on a new machine
        env = {**os.environ, "PREFECT_HOME": str(tmp_path / "home"), "CLONEMEM_WAREHOUSE": str(tmp_path / "wh.duckdb"),
               "CLONEMEM_EMBED_CACHE": str(tmp_path / "embeddings.sqlite3")}
        (tmp_path / "files").mkdir()
        files = replicate(args.copies, tmp_path / "files")
        got, import_s, _ = run(["import-locomo", *map(str, files), "--name", "scale"], env)
        if got.returncode:
            sys.exit(got.stderr)
        sizes = subprocess.run([EXE, "benchmarks", "--json"], env=env, capture_output=True, text=True)
        bench = json.loads(sizes.stdout)[0]
        out = {"benchmark": "evaluate_scale", "conversations": len(files), "traces": bench["traces"],
               "questions": bench["questions"], "import_s": round(import_s, 2), "runs": []}
        for spec in args.sets:
            if spec == "all":
                listed = subprocess.run([EXE, "systems", "--json"], env=env, capture_output=True, text=True)
                systems, ks = ",".join(json.loads(listed.stdout)), args.k_all
            else:
                systems, ks = spec, "5,10"
            # first: nothing cached; re-run: served by Prefect's cache; new Prefect home: every task runs
            # again (as after a change to the systems' code) with the embeddings on disk from the first
            for n, attempt in enumerate(("first", "re-run", "new Prefect home, embeddings on disk")):
                report = tmp_path / f"{spec.replace(',', '-')}-{n}.json"
                env_now = {**env, "PREFECT_HOME": str(tmp_path / f"home-{spec.replace(',', '-')}")} if n == 2 else env
                got, wall, rss = run(["evaluate", "scale", "--systems", systems, "--k", ks, "--force",
                                      "--json", str(report)], env_now)
                if got.returncode:
                    sys.exit(got.stderr)
                result = json.loads(report.read_text("utf-8"))
                ledger = subprocess.run([EXE, "sql", "SELECT count(*) AS n FROM llm_calls", "--format", "json"],
                                        env=env, capture_output=True, text=True)
                out["runs"].append({
                    "systems": spec, "k": ks, "attempt": attempt, "wall_s": round(wall, 2), "peak_rss_mb": round(rss),
                    "ledger_llm_calls_after": json.loads(ledger.stdout)[0]["n"],
                    "per_system": {r["system"]: {"build_s": round(r["build_seconds"], 2),
                                                 "p50_ms": r["retrieval_p50_ms"], "p95_ms": r["retrieval_p95_ms"],
                                                 "recall_flat": r["recall_flat"], "llm_calls": r["llm_calls"]}
                                   for r in result["results"]}})
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
