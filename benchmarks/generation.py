"""Generation performance (issue: stages I–III). Prints JSON.

- parallelism: 4 personas on the offline provider at simulated latency L; wall time of the flow
  divided by the critical-path bound (longest chain of dependent LLM calls × L), through Prefect
  (one task per LLM step) and, to separate scheduling from Prefect's per-task cost, in-process;
- prompt size: mean prompt tokens per call, 3-year persona vs 1-year persona (same event density);
- re-run: a finished generation run again makes zero LLM calls and leaves the warehouse bytes equal;
- wall time of one default persona end to end (in-process flow, and the CLI in a fresh process).

    python benchmarks/generation.py [--latency-ms 50 200] [--personas 4]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("PREFECT_HOME", tempfile.mkdtemp(prefix="clonemem-bench-prefect-"))
os.environ.setdefault("CLONEMEM_DISABLE_LIVE_LLM", "1")

from clonemem.prefect_env import configure

configure()

from clonemem.generation.execute import new_dags, run_inline  # noqa: E402
from clonemem.llm.model import MemorySink  # noqa: E402
from clonemem.runtime import Runtime, use  # noqa: E402
from clonemem.schemas.config import RunConfig  # noqa: E402


def config(
    name: str,
    seed: int,
    personas: int = 1,
    latency_ms: float = 0.0,
    span_years: float = 1.0,
    events: int = 4,
    workers: int = 64,
) -> RunConfig:
    return RunConfig.model_validate(
        {
            "name": name,
            "seed": seed,
            "generation": {
                "personas": personas,
                "span_years": span_years,
                "major_events": events,
                "workers": workers,
            },
            "providers": {"offline": {"latency_ms": latency_ms, "max_concurrency": 1024}},
        }
    )


def critical_path_calls(cfg: RunConfig) -> int:
    """persona → relations|seeds → arcs → major events → initial snapshot → (phase → update) × phases
    → detailed events → trace plans → trace content."""
    g = cfg.generation
    return 5 + 2 * g.major_events * g.phases_per_event + 3


def parallelism(latency_ms: float, personas: int, tmp: Path) -> dict:
    from clonemem.flows.generation import run_generation

    cfg = config(
        f"par-{latency_ms}",
        seed=1000 + int(latency_ms),
        personas=personas,
        latency_ms=latency_ms,
        workers=512,
    )
    started = time.perf_counter()
    summary = run_generation(cfg, str(tmp / f"par-{latency_ms}.duckdb"))
    flow_wall = time.perf_counter() - started
    bound = critical_path_calls(cfg) * latency_ms / 1000
    return {
        "latency_ms": latency_ms,
        "personas": personas,
        "llm_calls": summary.llm_calls,
        "critical_path_calls": critical_path_calls(cfg),
        "critical_path_bound_s": round(bound, 3),
        "flow_wall_s": round(flow_wall, 3),
        "ratio": round(flow_wall / bound, 3),
    }


def parallelism_inline(latency_ms: float, personas: int) -> dict:
    """The same graphs on a plain thread pool (no Prefect): the scheduling itself, without task overhead."""
    cfg = config("inline", seed=2000 + int(latency_ms), personas=personas, latency_ms=latency_ms)
    rt = Runtime(cfg)
    started = time.perf_counter()
    with use(rt):
        run_inline(new_dags(cfg), rt, lambda d: None, workers=512)
    wall = time.perf_counter() - started
    bound = critical_path_calls(cfg) * latency_ms / 1000
    return {
        "latency_ms": latency_ms,
        "personas": personas,
        "executor": "in-process thread pool",
        "wall_s": round(wall, 3),
        "ratio": round(wall / bound, 3),
    }


def prompt_size() -> dict:
    out = {}
    for years, events in ((1.0, 4), (3.0, 12)):
        cfg = config("prompt", seed=5, span_years=years, events=events)
        sink = MemorySink()
        rt = Runtime(cfg, sink=sink)
        with use(rt):
            run_inline(new_dags(cfg), rt, lambda d: None)
        tokens = [r.input_tokens for r in sink.records]
        out[f"{int(years)}y"] = {
            "calls": len(tokens),
            "mean_prompt_tokens": round(sum(tokens) / len(tokens), 1),
            "max_prompt_tokens": max(tokens),
        }
    out["ratio_3y_over_1y"] = round(
        out["3y"]["mean_prompt_tokens"] / out["1y"]["mean_prompt_tokens"], 3
    )
    return out


def rerun(tmp: Path) -> dict:
    from clonemem.flows.generation import run_generation

    cfg = config("rerun", seed=77)
    wh = tmp / "rerun.duckdb"
    t0 = time.perf_counter()
    first = run_generation(cfg, str(wh))
    t1 = time.perf_counter()
    digest = hashlib.sha256(wh.read_bytes()).hexdigest()
    second = run_generation(cfg, str(wh))
    t2 = time.perf_counter()
    return {
        "first_llm_calls": first.llm_calls,
        "first_traces": first.traces,
        "default_persona_flow_wall_s": round(t1 - t0, 2),
        "rerun_llm_calls": second.llm_calls,
        "rerun_wall_s": round(t2 - t1, 2),
        "warehouse_bytes_unchanged": hashlib.sha256(wh.read_bytes()).hexdigest() == digest,
    }


def cli_wall(tmp: Path) -> dict:
    home = tempfile.mkdtemp(prefix="clonemem-bench-cli-")
    cfg = tmp / "one.toml"
    cfg.write_text('name = "cli"\nseed = 3\n', "utf-8")
    exe = Path(sys.executable).with_name("clonemem")
    t0 = time.perf_counter()
    proc = subprocess.run(
        [str(exe), "--warehouse", str(tmp / "cli.duckdb"), "generate", "--config", str(cfg)],
        env={**os.environ, "PREFECT_HOME": home},
        capture_output=True,
        text=True,
        timeout=600,
    )
    return {
        "cli_default_persona_wall_s": round(time.perf_counter() - t0, 2),
        "exit_code": proc.returncode,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency-ms", type=float, nargs="+", default=[50.0, 200.0, 1000.0])
    parser.add_argument("--personas", type=int, default=4)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        result = {
            "benchmark": "generation",
            "rerun": rerun(tmp),
        }  # also warms the ephemeral server up
        result["parallelism_prefect"] = [
            parallelism(lat, args.personas, tmp) for lat in args.latency_ms
        ]
        result["parallelism_inline"] = [
            parallelism_inline(lat, args.personas) for lat in args.latency_ms
        ]
        result["prompt_size"] = prompt_size()
        result["cli"] = cli_wall(tmp)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
