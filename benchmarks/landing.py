"""Landing throughput of persona bundles: where the single-writer warehouse stops scaling. Prints JSON.

Generates default-size personas on the offline provider (no Prefect: what is measured is the writer),
writes each to a bundle file, then lands batches of bundles the way the orchestrating run of
``generate_distributed_flow`` does (every bundle read and checked, one transaction per batch) into a
warehouse that grows batch by batch. Reports bundle size, rows and LLM calls per persona, and landing
seconds per persona as the warehouse grows.

    python benchmarks/landing.py [--personas 16] [--batches 8]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
import tracemalloc
from pathlib import Path

os.environ.setdefault("PREFECT_HOME", tempfile.mkdtemp(prefix="clonemem-bench-prefect-"))
os.environ.setdefault("CLONEMEM_DISABLE_LIVE_LLM", "1")

from clonemem.prefect_env import configure

configure()

from clonemem.generation.assemble import assemble  # noqa: E402
from clonemem.generation.bundle import read_bundle, write_bundle  # noqa: E402
from clonemem.generation.execute import new_dags, run_inline  # noqa: E402
from clonemem.generation.land import land_bundles  # noqa: E402
from clonemem.llm.model import MemorySink  # noqa: E402
from clonemem.runtime import Runtime, use  # noqa: E402
from clonemem.schemas.config import RunConfig  # noqa: E402
from clonemem.warehouse import Warehouse  # noqa: E402


def bundles_for(name: str, personas: int, folder: Path) -> list[str]:
    """``personas`` default-size personas (GenerationConfig defaults) of benchmark ``name``, as bundle files
    carrying the LLM calls each persona made (as a worker's bundle does)."""
    cfg = RunConfig.model_validate({"name": name, "seed": 11, "generation": {"personas": personas}})
    urls: list[str] = []
    for dag in new_dags(cfg):
        sink = MemorySink()
        rt = Runtime(cfg, sink=sink, run_id=f"bench-{name}")

        def done(d) -> None:
            d.calls = list(sink.records)
            url = str(folder / name / f"persona-{d.spec.index:04d}.json")
            write_bundle(url, cfg, d, assemble(d, cfg.name), rt.run_id)
            urls.append(url)

        with use(rt):
            run_inline([dag], rt, done)
    return sorted(urls)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument(
        "--personas", type=int, default=16, help="personas per batch (one transaction each)"
    )
    ap.add_argument("--batches", type=int, default=8, help="batches landed one after the other")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="clonemem-landing-") as tmp:
        folder = Path(tmp)
        started = time.perf_counter()
        batches = [bundles_for(f"land-{b}", args.personas, folder) for b in range(args.batches)]
        generate_s = time.perf_counter() - started
        tracemalloc.start()
        first = [read_bundle(u) for u in batches[0]]
        held = tracemalloc.get_traced_memory()[
            0
        ]  # what a landing holds in memory per persona until it commits
        tracemalloc.stop()
        sizes = [Path(u).stat().st_size for urls in batches for u in urls]
        rows = [sum(len(v) for v in b.tables.values()) for b in first]
        out: dict = {
            "personas_per_batch": args.personas,
            "batches": args.batches,
            "offline_generation_s_per_persona": round(
                generate_s / (args.personas * args.batches), 3
            ),
            "bundle_bytes_per_persona": round(statistics.mean(sizes)),
            "rows_per_persona": round(statistics.mean(rows)),
            "llm_calls_per_persona": round(statistics.mean(len(b.calls) for b in first)),
            "memory_mb_per_persona_while_landing": round(held / len(first) / 1e6, 2),
            "landing": [],
        }
        wh_path = folder / "wh.duckdb"
        for b, urls in enumerate(batches):
            with Warehouse.open_writer(wh_path) as wh:
                before = wh.scalar("SELECT count(*) FROM personas")
                t0 = time.perf_counter()
                landed = land_bundles(
                    wh, [read_bundle(u) for u in urls]
                )  # read + check + one transaction
                seconds = time.perf_counter() - t0
            assert len(landed) == len(urls)
            out["landing"].append(
                {
                    "personas_in_warehouse_before": before,
                    "seconds": round(seconds, 3),
                    "seconds_per_persona": round(seconds / len(urls), 4),
                }
            )
        per = statistics.mean(x["seconds_per_persona"] for x in out["landing"])
        out["mean_landing_s_per_persona"] = round(per, 4)
        out["personas_landed_per_hour_by_one_writer"] = round(3600 / per)
        out["warehouse_mb"] = round(wh_path.stat().st_size / 1e6, 1)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
