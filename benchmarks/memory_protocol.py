"""The memory protocol's cost (issue: open evaluation). Prints JSON.

- per-query overhead of HTTP on loopback: the same bm25 index asked the same questions in-process and
  through `clonemem serve-memory bm25` (p50, p95 of each, and of the difference per question);
- the same for the stdlib example server (`examples/memory-server-stdlib/server.py`, TCP_NODELAY set)
  and for a plain stdlib server (the example's handler with Nagle's algorithm left on, as
  `BaseHTTPRequestHandler` has it: headers and body leave in two writes), each with the harness's
  client as it is (TCP_QUICKACK on Linux) and without TCP_QUICKACK (a client that delays its ACKs):
  target p50 overhead < 2 ms; the in-process cost is the example's own ``Memory.query``;
- the demo evaluation of bm25 in-process vs through serve-memory (`clonemem evaluate demo --systems
  bm25` and `--systems URL`, each in a fresh process with a fresh Prefect home: nothing cached), the
  flow's own seconds and the process's wall time, the fastest of ``--runs`` interleaved runs of each;
  target: through the protocol ≤ 1.5× in-process;
  and the recall of both (serve-memory's within 0.02 of in-process).

The demo benchmark (`clonemem demo`'s config: two one-year personas, offline) is generated into a
temporary warehouse unless ``--warehouse`` names one that holds it.

    python benchmarks/memory_protocol.py [--warehouse demo.duckdb] [--repeat 3] [--runs 3] [--overhead-only]

Each figure is printed with the machine's load (`uptime`'s load averages) when it was taken.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

EXE = str(Path(sys.executable).with_name("clonemem"))
DEMO = 'name = "demo"\n[generation]\npersonas = 2\n'
TARGET = 1.5
OVERHEAD_TARGET_MS = 2.0
EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "memory-server-stdlib" / "server.py"
# the example's handler as a stranger's first server has it: Nagle's algorithm on
PLAIN = (
    "import importlib.util, sys; spec = importlib.util.spec_from_file_location('server', sys.argv[1]); "
    "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m); "
    "m.Handler.disable_nagle_algorithm = False; sys.argv = [sys.argv[1], '--port', '0']; m.main()"
)


def load() -> str:
    """The load averages (1, 5, 15 min), as `uptime` prints them."""
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def env(home: Path) -> dict[str, str]:
    out = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_LOGGING")}
    out["PREFECT_HOME"] = str(home)
    return out


def generate(folder: Path) -> Path:
    wh = folder / "demo.duckdb"
    config = folder / "demo.toml"
    config.write_text(DEMO, "utf-8")
    got = subprocess.run(
        [EXE, "--warehouse", str(wh), "generate", "--config", str(config)],
        env=env(folder / "gen"),
        capture_output=True,
        text=True,
    )
    if got.returncode not in (0, 3):  # 3: the gate failed; it is evaluated with --force
        raise SystemExit(f"generation failed: {got.stderr[-2000:]}")
    return wh


def start_server(system: str) -> tuple[subprocess.Popen, str]:
    return start([EXE, "serve-memory", system, "--port", "0"])


def start(argv: list[str]) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline() if proc.stdout else ""
    url = next(w for w in line.split() if w.startswith("http://"))
    return proc, url


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))], 3)


def query_overhead(wh: Path, url: str, repeat: int) -> dict:
    """bm25 built on each persona's whole history, in-process and on the server; every question asked
    ``repeat`` times of each (the first remote query, which builds the server's index, left out)."""
    from clonemem.evaluation.run import load_benchmark
    from clonemem.memory.base import BuildContext
    from clonemem.memory.flat import BM25
    from clonemem.memory.remote import RemoteOptions, remote_system
    from clonemem.warehouse import Warehouse
    from clonemem.warehouse.catalog import resolve_benchmark

    with Warehouse.open_reader(wh) as r:
        bid, _ = resolve_benchmark(r, "demo")
        personas = load_benchmark(r, bid)
    remote_cls = remote_system(None, url, RemoteOptions())
    local_ms, remote_ms, diff_ms = [], [], []
    for p in personas:
        ctx = BuildContext(llm=None, persona_id=p.public_id, release_ids=p.release_ids)  # type: ignore[arg-type]
        local, remote = BM25(), remote_cls()
        local.build(p.traces, ctx)
        remote.reset(ctx)
        remote.ingest(p.traces, ctx)
        remote.retrieve(p.questions[0].view(), 20)  # warm-up: the server builds its index
        for _ in range(repeat):
            for q in p.questions:
                t0 = time.perf_counter()
                local.retrieve(q.view(), 20)
                t1 = time.perf_counter()
                remote.retrieve(q.view(), 20)
                t2 = time.perf_counter()
                local_ms.append((t1 - t0) * 1000)
                remote_ms.append((t2 - t1) * 1000)
                diff_ms.append((t2 - t1 - (t1 - t0)) * 1000)
    return {
        "queries": len(diff_ms),
        "in_process_ms": {"p50": pct(local_ms, 50), "p95": pct(local_ms, 95)},
        "through_http_ms": {"p50": pct(remote_ms, 50), "p95": pct(remote_ms, 95)},
        "overhead_ms": {
            "p50": pct(diff_ms, 50),
            "p95": pct(diff_ms, 95),
            "mean": round(statistics.fmean(diff_ms), 3),
        },
    }


def stdlib_overhead(wh: Path, url: str, repeat: int, quickack: bool) -> dict:
    """The example's retriever behind ``url``, and in this process (its ``Memory`` class, no HTTP): every
    question asked ``repeat`` times of each, through the harness's client (``quickack``: as it is on
    Linux; False: a client that delays its ACKs)."""
    from clonemem.evaluation.run import load_benchmark
    from clonemem.memory.base import BuildContext
    from clonemem.memory.remote import RemoteOptions, protocol_time, remote_system, trace_body
    from clonemem.warehouse import Warehouse
    from clonemem.warehouse.catalog import resolve_benchmark

    spec = importlib.util.spec_from_file_location("example_server", EXAMPLE)
    assert spec is not None and spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    with Warehouse.open_reader(wh) as r:
        bid, _ = resolve_benchmark(r, "demo")
        personas = load_benchmark(r, bid)
    remote_cls = remote_system(None, url, RemoteOptions(quickack=quickack))
    local_ms, remote_ms, diff_ms = [], [], []
    started_load = load()
    for p in personas:
        ctx = BuildContext(llm=None, persona_id=p.public_id, release_ids=p.release_ids)  # type: ignore[arg-type]
        local, remote = example.Memory(None), remote_cls()
        local.ingest(
            {
                "persona_id": p.public_id,
                "traces": [
                    trace_body(p.release_ids.get(t.trace_id, t.trace_id), t) for t in p.traces
                ],
            }
        )
        remote.reset(ctx)
        remote.ingest(p.traces, ctx)
        for _ in range(repeat):
            for q in p.questions:
                body = {
                    "persona_id": p.public_id,
                    "question_id": q.question_id,
                    "question": q.question,
                    "question_time": protocol_time(q.question_time),
                    "k": 20,
                }
                t0 = time.perf_counter()
                local.query(body)
                t1 = time.perf_counter()
                remote.retrieve(q.view(), 20)
                t2 = time.perf_counter()
                local_ms.append((t1 - t0) * 1000)
                remote_ms.append((t2 - t1) * 1000)
                diff_ms.append((t2 - t1 - (t1 - t0)) * 1000)
    return {
        "queries": len(diff_ms),
        "client_quickack": quickack,
        "load": f"{started_load} → {load()}",
        "in_process_ms": {"p50": pct(local_ms, 50), "p95": pct(local_ms, 95)},
        "through_http_ms": {"p50": pct(remote_ms, 50), "p95": pct(remote_ms, 95)},
        "overhead_ms": {
            "p50": pct(diff_ms, 50),
            "p95": pct(diff_ms, 95),
            "mean": round(statistics.fmean(diff_ms), 3),
        },
        "within_target": pct(diff_ms, 50) < OVERHEAD_TARGET_MS,
    }


def stdlib_servers(wh: Path, repeat: int) -> dict:
    """The example server and the plain one, each through the harness's client with and without QUICKACK."""
    out: dict[str, dict] = {}
    for name, argv in (
        ("example_server_nodelay", [sys.executable, str(EXAMPLE), "--port", "0"]),
        ("plain_server_nagle", [sys.executable, "-c", PLAIN, str(EXAMPLE)]),
    ):
        proc, url = start(argv)
        try:
            out[name] = {
                "harness": stdlib_overhead(wh, url, repeat, True),
                "client_without_quickack": stdlib_overhead(wh, url, 1, False),
            }
        finally:
            proc.terminate()
            proc.wait(10)
    return out


def evaluate(wh: Path, systems: str, folder: Path, tag: str) -> dict:
    out = folder / f"{tag}.json"
    t0 = time.perf_counter()
    got = subprocess.run(
        [
            EXE,
            "--warehouse",
            str(wh),
            "evaluate",
            "demo",
            "--systems",
            systems,
            "--k",
            "5,10,20",
            "--json",
            str(out),
            "--force",
        ],
        env=env(folder / f"home-{tag}"),
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - t0
    if got.returncode != 0:
        raise SystemExit(f"evaluate {systems} failed: {got.stderr[-2000:]}")
    result = json.loads(out.read_text("utf-8"))
    return {
        "flow_s": result["seconds"],
        "wall_s": round(wall, 2),
        "recall_flat": {r["k"]: r["recall_flat"] for r in result["results"]},
    }


def best(runs: list[dict]) -> dict:
    """The fastest run (the least disturbed by other work), with every run's flow seconds."""
    out = dict(min(runs, key=lambda r: r["flow_s"]))
    out["all_flow_s"] = [r["flow_s"] for r in runs]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--warehouse", type=Path, help="a warehouse holding the 'demo' benchmark")
    parser.add_argument(
        "--repeat", type=int, default=3, help="times each question is asked for the overhead"
    )
    parser.add_argument(
        "--runs", type=int, default=3, help="evaluations of each kind (the fastest is compared)"
    )
    parser.add_argument(
        "--overhead-only", action="store_true", help="per-query overheads only, no evaluations"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="clonemem-protocol-") as tmp:
        folder = Path(tmp)
        t0 = time.perf_counter()
        wh = args.warehouse or generate(folder)
        made = round(time.perf_counter() - t0, 1)
        out: dict = {
            "benchmark": "demo" + ("" if args.warehouse else f" (generated in {made} s)"),
            "stdlib": stdlib_servers(wh, args.repeat),
        }
        proc, url = start_server("bm25")
        try:
            started = load()
            out["query"] = {**query_overhead(wh, url, args.repeat), "load": f"{started} → {load()}"}
            runs: dict[str, list[dict]] = {"in_process": [], "protocol": []}
            for i in range(
                0 if args.overhead_only else args.runs
            ):  # interleaved: load hits both alike
                runs["in_process"].append(
                    {**evaluate(wh, "bm25", folder, f"in-process-{i}"), "load": load()}
                )
                runs["protocol"].append(
                    {**evaluate(wh, url, folder, f"protocol-{i}"), "load": load()}
                )
        finally:
            proc.terminate()
            proc.wait(10)
    if runs["in_process"]:
        local, remote = (best(runs[m]) for m in ("in_process", "protocol"))
        ratio = round(remote["flow_s"] / local["flow_s"], 2)
        out["evaluation_bm25"] = {
            "in_process": local,
            "through_serve_memory": remote,
            "ratio_flow_s": ratio,
            "ratio_wall_s": round(remote["wall_s"] / local["wall_s"], 2),
            "target": TARGET,
            "within_target": ratio <= TARGET,
            "max_recall_gap": round(
                max(
                    abs(remote["recall_flat"][k] - local["recall_flat"][k])
                    for k in local["recall_flat"]
                ),
                4,
            ),
        }
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
