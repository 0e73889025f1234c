"""The quick suite (`make test`) run several times in a row beside a CPU-bound process (issue: speed).
Prints JSON: each run's outcome and wall time, and its slowest tests against the pytest timeout.

A test that needs more than a third of its timeout on a loaded machine is a flake waiting to happen;
``worst_share_of_timeout`` says how close the slowest one came.

    python benchmarks/suite_under_load.py [--runs 5] [--busy 1] [-- extra pytest args]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import re
import subprocess
import sys
import time
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DURATION = re.compile(r"^\s*([\d.]+)s (call|setup|teardown)\s+(\S+)", re.M)
SUMMARY = re.compile(r"^=*\s*(\d+ (?:passed|failed|error).*?) in ([\d.]+)s", re.M)


def spin() -> None:  # a CPU-bound process: one core kept busy for the whole measurement
    while True:
        pass


def timeout_s() -> float:
    options = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["tool"]["pytest"][
        "ini_options"
    ]
    return float(options.get("timeout", 0))


def make_test_args() -> list[str]:
    """The pytest options of the Makefile's `test` target (two processes, groups of files), so the suite is
    timed as `make test` runs it."""
    for line in (ROOT / "Makefile").read_text("utf-8").split("\ntest:", 1)[1].splitlines()[1:]:
        if "-m pytest" in line:
            return line.split("-m pytest", 1)[1].split()
    raise SystemExit("Makefile: no pytest command under the `test` target")


def one_run(extra: list[str]) -> dict:
    started = time.perf_counter()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            *make_test_args(),
            "--durations=8",
            "--durations-min=1",
            *extra,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - started
    slowest: dict[str, float] = {}
    for seconds, _phase, test in DURATION.findall(done.stdout):
        slowest[test] = slowest.get(test, 0.0) + float(seconds)
    summary = SUMMARY.findall(done.stdout)
    return {
        "exit_code": done.returncode,
        "wall_s": round(wall, 1),
        "summary": summary[-1][0] if summary else None,
        "slowest": dict(sorted(slowest.items(), key=lambda kv: -kv[1])[:5]),
        "failures": re.findall(r"^(?:FAILED|ERROR) (\S+)", done.stdout, re.M),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--busy", type=int, default=1, help="CPU-bound processes beside the suite")
    parser.add_argument("pytest_args", nargs="*")
    args = parser.parse_args()
    busy = [multiprocessing.Process(target=spin, daemon=True) for _ in range(args.busy)]
    for p in busy:
        p.start()
    try:
        runs = []
        for n in range(args.runs):
            runs.append(one_run(args.pytest_args))
            # each run as it ends (stderr): an hour-long measurement cut short still says what it saw
            print(json.dumps({"run": n + 1, **runs[-1]}), file=sys.stderr, flush=True)
            if runs[-1]["exit_code"]:
                break  # "in a row": the first red run ends the measurement
    finally:
        for p in busy:
            p.terminate()
            p.join()
    limit = timeout_s()
    worst = max((s for r in runs for s in r["slowest"].values()), default=0.0)
    print(
        json.dumps(
            {
                "benchmark": "suite_under_load",
                "busy_processes": args.busy,
                "runs_asked": args.runs,
                "green_in_a_row": next(
                    (i for i, r in enumerate(runs) if r["exit_code"]), len(runs)
                ),
                "pytest_timeout_s": limit,
                "worst_test_s": round(worst, 1),
                "worst_share_of_timeout": round(worst / limit, 3) if limit else None,
                "runs": runs,
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
