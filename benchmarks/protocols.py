"""The field's benchmarks at their real sizes (issue 28): importing a LongMemEval file of the
``longmemeval_s`` shape (target: < 90 s and < 1.5 GB peak RSS on 2 cores), and a scaled-down
``longmemeval_m`` (~500 sessions per instance) to estimate what the full ``_m`` costs.

Each import runs in a child process of its own (its peak RSS is its own ``ru_maxrss``), through
the same path as ``clonemem import longmemeval`` (:func:`clonemem.importers.base.import_stream`), into a
fresh warehouse. The synthetic files (``benchmarks/longmemeval_synthetic.py``) are written to a
temporary folder unless ``--keep DIR`` names one (then reused). Prints JSON.

    python benchmarks/protocols.py import [--instances 500] [--m-instances 50] [--keep DIR]
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
from benchmarks import longmemeval_synthetic

TARGET_SECONDS = 90.0
TARGET_RSS_MB = 1536.0

_CHILD = """
import json, resource, sys, time
from clonemem.importers import importer
from clonemem.importers.base import import_stream
from clonemem.warehouse import Warehouse
t0 = time.perf_counter()
summary = import_stream(sys.argv[2], importer("longmemeval"), [sys.argv[1]], "lme")
seconds = time.perf_counter() - t0
with Warehouse.open_reader(sys.argv[2]) as wh:
    texts, chars = wh.rows("SELECT count(*), sum(length(content)) FROM trace_texts")[0]
    turn_chars = wh.scalar("SELECT sum(length(content)) FROM v_traces")
print(json.dumps({"seconds": seconds, "personas": summary.personas, "traces": summary.traces,
                  "stored_texts": texts, "stored_text_chars": chars, "turn_chars": turn_chars,
                  "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}))
"""


def _file(folder: Path, name: str, instances: int, sessions: int, pool: int) -> tuple[Path, dict]:
    path = folder / f"{name}-{instances}x{sessions}-pool{pool}.json"
    shape = {"instances": instances, "sessions_per_instance": sessions, "pool": pool}
    if not path.exists():
        t0 = time.perf_counter()
        partial = path.with_suffix(".partial")
        longmemeval_synthetic.write(partial, instances, sessions, pool)
        partial.replace(path)
        shape["generated_s"] = round(time.perf_counter() - t0, 1)
    return path, shape | {"file_mb": round(path.stat().st_size / 2**20, 1)}


def measure_import(path: Path, folder: Path) -> dict:
    """Import ``path`` into a fresh warehouse in a child process: seconds, peak RSS, what was stored."""
    warehouse = folder / f"{path.stem}.duckdb"
    for leftover in (warehouse, warehouse.with_name(warehouse.name + ".wal")):
        leftover.unlink(missing_ok=True)
    done = subprocess.run([sys.executable, "-c", _CHILD, str(path), str(warehouse)], capture_output=True, text=True,
                          check=False, env=os.environ | {"PYTHONPATH": str(Path(__file__).resolve().parents[1])})
    if done.returncode != 0:
        raise SystemExit(done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "import failed")
    out = json.loads(done.stdout.strip().splitlines()[-1])
    out["warehouse_mb"] = round(warehouse.stat().st_size / 2**20, 1)
    out["seconds"] = round(out["seconds"], 1)
    out["text_dedup_ratio"] = round(out["turn_chars"] / max(1, out["stored_text_chars"]), 1)
    warehouse.unlink(missing_ok=True)
    return out


def run_import(instances: int, m_instances: int, folder: Path) -> dict:
    s_path, s_shape = _file(folder, "longmemeval_s", instances, 50, 500)
    s = s_shape | measure_import(s_path, folder)
    s["meets_target"] = s["seconds"] < TARGET_SECONDS and s["peak_rss_mb"] < TARGET_RSS_MB
    print(json.dumps({"longmemeval_s": s}), file=sys.stderr, flush=True)  # early, the _m run takes a while
    # _m: ~500 sessions per instance; a tenth of its instances (the pool scaled alike), extrapolated
    m_path, m_shape = _file(folder, "longmemeval_m", m_instances, 500, 500 * m_instances // 5)
    m = m_shape | measure_import(m_path, folder)
    scale = 500 / m_instances
    m["extrapolated_to_500_instances"] = {
        "seconds": round(m["seconds"] * scale), "file_gb": round(m["file_mb"] * scale / 1024, 1),
        "traces": int(m["traces"] * scale),
        "note": "time, file size and trace rows grow with the instances; peak RSS does not (one batch held)",
    }
    return {"benchmark": "protocols.import", "cpus": os.cpu_count(), "load_1min": round(os.getloadavg()[0], 2),
            "longmemeval_s": s, "longmemeval_m_scaled": m}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("section", choices=["import"])
    parser.add_argument("--instances", type=int, default=500)
    parser.add_argument("--m-instances", type=int, default=50)
    parser.add_argument("--keep", type=Path, default=None, help="folder for the synthetic files (reused)")
    args = parser.parse_args()
    if args.keep is not None:
        args.keep.mkdir(parents=True, exist_ok=True)
        print(json.dumps(run_import(args.instances, args.m_instances, args.keep), indent=2))
        return
    with tempfile.TemporaryDirectory() as tmp:
        print(json.dumps(run_import(args.instances, args.m_instances, Path(tmp)), indent=2))


if __name__ == "__main__":
    main()
