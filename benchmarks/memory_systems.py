"""The consolidating memory systems at scale (issues 9 and 14): per system and data set, build time,
retrieval latency, peak memory, extractor calls, write coverage, recall, and the retrieval-collapse
signals. Prints JSON.

Data sets: the LoCoMo conversations under ``--locomo`` (default: the dev conversations), imported as
``clonemem import-locomo`` does; and one synthetic persona of about ``--traces`` traces generated
on the offline provider (stages I-IV: its questions are real stage-IV items with gold evidence).
Each (data set, system) runs in its own process, so peak RSS is that system's.

Time is split between the embedding model (every call of ``clonemem.memory.embed.encode``, timed)
and everything else (the system's own code and its LLM steps on the offline provider). The budgets
(build of 6k traces < 60 s, retrieval p50 < 5 ms and p95 < 20 ms) are met by the latter; the encoder's
share is reported beside it, because multilingual-e5-small is compute-bound (about 1,200 tokens a second
on 2 cores), so with it no system that embeds 6k traces builds in a minute. ``--encoder hash`` swaps in a
feature-hashing bag-of-words encoder to time the systems' own code on a busy machine; recall under
it is not comparable with the real encoder's.

    python benchmarks/memory_systems.py [--systems mem0 amem omem bm25] [--datasets locomo synthetic]
        [--traces 6000] [--k 10] [--encoder project|hash] [--locomo DIR...]
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("PREFECT_HOME", tempfile.mkdtemp(prefix="clonemem-bench-prefect-"))
os.environ.setdefault("CLONEMEM_DISABLE_LIVE_LLM", "1")
os.environ.setdefault(
    "CLONEMEM_EMBED_CACHE", "off"
)  # time the encoder cold, not an earlier run's vectors

import numpy as np

LOCOMO_DEV = Path(os.environ.get("CLONEMEM_LOCOMO_DEV", "/work/shared/data/locomo-dev"))


# -- data sets ------------------------------------------------------------------------------------


def locomo(paths: list[str], workdir: Path) -> list:
    from clonemem.evaluation.run import load_benchmark
    from clonemem.importers import import_files
    from clonemem.warehouse import Warehouse
    from clonemem.warehouse.catalog import resolve_benchmark

    with Warehouse.open_writer(workdir / "locomo.duckdb") as wh:
        import_files(wh, "locomo", paths, "locomo")
        return load_benchmark(wh, resolve_benchmark(wh, "locomo")[0])


def synthetic(n_traces: int, workdir: Path) -> list:
    """One persona of about ``n_traces`` traces over three years, with its stage-IV questions, on the
    offline provider (generation and QA inline, landed in a throw-away warehouse)."""
    from concurrent.futures import ThreadPoolExecutor

    from clonemem.evaluation.run import load_benchmark
    from clonemem.generation.assemble import assemble
    from clonemem.generation.execute import new_dags, run_inline
    from clonemem.generation.land import ensure_benchmark, land
    from clonemem.ids import benchmark_id
    from clonemem.qa.land import land_qa, qa_rows
    from clonemem.qa.pipeline import run_item
    from clonemem.qa.report import candidates
    from clonemem.qa.segments import persona_segments
    from clonemem.runtime import Runtime, use
    from clonemem.schemas.config import RunConfig
    from clonemem.warehouse import Warehouse

    # 12 major events x 5 phases = 60 phases of (12 events x 7 traces + 16 noise traces) = 6,000 traces
    scale = n_traces / 6000
    cfg = RunConfig.model_validate(
        {
            "name": "synthetic",
            "generation": {
                "span_years": 3.0,
                "major_events": 12,
                "phases_per_event": 5,
                "events_per_phase": max(1, round(12 * scale)),
                "traces_per_event": 7,
                "noise_traces_per_phase": round(16 * scale),
            },
        }
    )
    rt = Runtime(cfg)
    done: list = []
    with use(rt):
        run_inline(new_dags(cfg), rt, done.append, workers=4)
    assembly = assemble(done[0], cfg.name)
    bid = benchmark_id(cfg.name)
    with Warehouse.open_writer(workdir / "synthetic.duckdb") as wh:
        ensure_benchmark(wh, cfg)
        land(wh, assembly, bid)
        pid = assembly.rows.persona_id
        segments = persona_segments(wh, pid, cfg.qa)
        cands = candidates(segments, cfg.qa.types_per_segment, cfg.qa.questions_per_type)
        with use(rt), ThreadPoolExecutor(4) as pool:
            results = list(
                pool.map(
                    lambda c: run_item(
                        c[0],
                        c[1],
                        cfg.qa.distractor_rounds,
                        lambda stage, inp: stage.run(rt.model(stage.role), inp),
                    ),
                    cands,
                )
            )
        arc_ids = dict(
            wh.rows("SELECT 'A' || (seq + 1), arc_id FROM life_arcs WHERE persona_id = ?", [pid])
        )
        land_qa(wh, pid, bid, qa_rows(pid, bid, segments, results, arc_ids), {})
        return load_benchmark(wh, bid)


# -- one system on one data set (in its own process) ---------------------------------------------


def hashing_encode(texts: list[str], batch_size: int = 0) -> np.ndarray:
    """Feature-hashing bag of words and character trigrams, L2-normalised (a fast stand-in, for timing)."""
    from clonemem.ids import stable_int
    from clonemem.text import words

    out = np.zeros(
        (len(texts), 384), dtype=np.float32
    )  # the width of all-MiniLM-L6-v2 (older code assumes it)
    for r, text in enumerate(texts):
        toks = words(text)
        for tok in toks + [tok[i : i + 3] for tok in toks for i in range(max(1, len(tok) - 2))]:
            out[r, stable_int(tok) % 384] += 1.0
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    return out / np.maximum(norms, 1e-9)


def peak_rss_mb() -> float:
    """This process's peak resident memory. Linux keeps ``ru_maxrss`` across exec (a worker would report
    its parent's peak), so the kernel's high-water mark of the current image is read when available."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def run_one(system: str, personas: list, k: int, encoder: str) -> dict:
    from clonemem.evaluation.metrics import recall_at_k
    from clonemem.memory import SYSTEMS, embed
    from clonemem.memory.base import BuildContext
    from clonemem.memory.coverage import write_coverage
    from clonemem.runtime import Runtime, use
    from clonemem.schemas.config import RunConfig
    from clonemem.stages import STAGES

    real = hashing_encode if encoder == "hash" else embed.encode
    encode_s = [0.0]

    def timed_encode(texts, *args, **kwargs):
        t0 = time.perf_counter()
        try:
            return real(texts, *args, **kwargs)
        finally:
            encode_s[0] += time.perf_counter() - t0

    embed.encode = timed_encode
    embed.encode(["load the model before timing"])
    rt = Runtime(RunConfig())
    build_s = build_encode_s = 0.0
    calls = 0
    latencies, own, recalls, lists, ids_at_k, coverage, traces = [], [], [], set(), [], [], 0
    for persona in personas:
        model = rt.model("extractor")
        before = model.usage.calls
        memory = SYSTEMS.get(system)()
        ctx = BuildContext(
            llm=lambda name, inp: STAGES.get(name).run(model, inp), language=persona.language
        )
        encode_s[0] = 0.0
        t0 = time.perf_counter()
        with use(rt):
            memory.build(persona.traces, ctx)
        build_s += time.perf_counter() - t0
        build_encode_s += encode_s[0]
        calls += model.usage.calls - before
        try:
            coverage.append(write_coverage(memory, persona.traces) * len(persona.traces))
        except (NotImplementedError, AttributeError):  # a system that cannot list its memory
            coverage.append(float("nan"))
        traces += len(persona.traces)
        for q in persona.questions:
            encode_s[0] = 0.0
            t1 = time.perf_counter()
            items = memory.retrieve(q.view(), k)
            ms = (time.perf_counter() - t1) * 1000
            latencies.append(ms)
            own.append(ms - encode_s[0] * 1000)
            got = list(dict.fromkeys(t for item in items for t in item.trace_ids))[:k]
            lists.add((persona.persona_id, tuple(got)))
            ids_at_k.append(len(got))
            recalls.append(
                recall_at_k(q.evidence_sets, [t for item in items for t in item.trace_ids], k)[
                    "recall_flat"
                ]
            )
    n_q = len(recalls)
    return {
        "system": system,
        "personas": len(personas),
        "traces": traces,
        "questions": n_q,
        "build_s": round(build_s, 2),
        "build_encode_s": round(build_encode_s, 2),
        "build_own_s": round(build_s - build_encode_s, 2),
        "retrieval_p50_ms": round(float(np.percentile(latencies, 50)), 3) if n_q else None,
        "retrieval_p95_ms": round(float(np.percentile(latencies, 95)), 3) if n_q else None,
        "retrieval_own_p50_ms": round(float(np.percentile(own, 50)), 3) if n_q else None,
        "retrieval_own_p95_ms": round(float(np.percentile(own, 95)), 3) if n_q else None,
        "peak_rss_mb": peak_rss_mb(),
        "extractor_calls": calls,
        "calls_per_trace": round(calls / traces, 3) if traces else None,
        "write_coverage": round(sum(coverage) / traces, 4)
        if traces and not np.isnan(sum(coverage))
        else None,
        f"recall_flat@{k}": round(float(np.mean(recalls)), 4) if n_q else None,
        "distinct_lists_share": round(len(lists) / n_q, 4) if n_q else None,
        f"mean_ids@{k}": round(float(np.mean(ids_at_k)), 2) if n_q else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--systems", nargs="+", default=["bm25", "mem0", "amem", "omem"])
    parser.add_argument(
        "--datasets", nargs="+", default=["locomo", "synthetic"], choices=["locomo", "synthetic"]
    )
    parser.add_argument("--locomo", nargs="+", default=[str(LOCOMO_DEV)])
    parser.add_argument("--traces", type=int, default=6000)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--encoder", choices=["project", "hash"], default="project")
    parser.add_argument("--worker", nargs=2, metavar=("DATA", "SYSTEM"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        data, system = args.worker
        print(
            json.dumps(run_one(system, pickle.loads(Path(data).read_bytes()), args.k, args.encoder))
        )
        return
    out: dict = {"benchmark": "memory_systems", "k": args.k, "encoder": args.encoder, "results": []}
    with tempfile.TemporaryDirectory(prefix="clonemem-memsys-") as tmp:
        work = Path(tmp)
        for name in args.datasets:
            t0 = time.perf_counter()
            personas = (
                locomo(args.locomo, work) if name == "locomo" else synthetic(args.traces, work)
            )
            data = work / f"{name}.pkl"
            data.write_bytes(pickle.dumps(personas))
            prepared = round(time.perf_counter() - t0, 1)
            for system in args.systems:
                proc = subprocess.run(
                    [
                        sys.executable,
                        __file__,
                        "--worker",
                        str(data),
                        system,
                        "--k",
                        str(args.k),
                        "--encoder",
                        args.encoder,
                    ],
                    capture_output=True,
                    text=True,
                    check=False,
                )
                if proc.returncode != 0:
                    row = {"system": system, "error": proc.stderr.strip().splitlines()[-1:]}
                else:
                    row = json.loads(proc.stdout.strip().splitlines()[-1])
                out["results"].append({"dataset": name, "prepared_s": prepared, **row})
                print(json.dumps(out["results"][-1]), file=sys.stderr, flush=True)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
