"""mypy (with the pydantic plugin) over every package of the project, held to a committed baseline.

The project's folders are sub-packages of one ``clonemem`` namespace through ``package-dir`` in
pyproject.toml, a mapping mypy cannot read. The check therefore lays out the namespace as symlinks in
a temporary folder and points mypy at it. Errors are compared with ``tools/mypy-baseline.txt`` by file,
error code and message (not line: an edit above an old error must not count as a new one). A new error
fails the check; ``--update`` rewrites the baseline and refuses to let it grow, so it may only shrink.

    python tools/check_types.py            # exit 1 on an error that is not in the baseline
    python tools/check_types.py --update   # after fixing errors: drop them from the baseline (without a
                                           # baseline file: start one from today's errors)
    python tools/check_types.py --only F.py ...  # these files alone (e.g. a plugin's modules, outside
                                           # the project), every error shown, no baseline
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

from clonemem.layout import MAPPED

ROOT = Path(__file__).resolve().parents[1]
BASELINE = ROOT / "tools" / "mypy-baseline.txt"
LINE = re.compile(r"^(?P<path>[^:]+):(?P<line>\d+): error: (?P<message>.*?)(?:  \[(?P<code>[\w-]+)\])?$")

Key = tuple[str, str, str]  # (path in the repository, error code, message)


def namespace_tree(into: Path) -> Path:
    pkg = into / "clonemem"
    if pkg.exists():
        shutil.rmtree(pkg)
    pkg.mkdir(parents=True)
    for entry in (ROOT / "clonemem").iterdir():
        if entry.name != "__pycache__":
            (pkg / entry.name).symlink_to(entry)
    for name in MAPPED:
        (pkg / name).symlink_to(ROOT / name)
    return pkg


def repo_path(path: str, tree: Path) -> str:
    """``<tmp>/clonemem/flows/x.py`` -> ``flows/x.py``; ``<tmp>/clonemem/cli.py`` -> ``clonemem/cli.py``."""
    prefix = str(tree) + "/"
    parts = Path(path[len(prefix):] if path.startswith(prefix) else path).parts
    return "/".join(parts if parts and parts[0] in MAPPED else ("clonemem", *parts))


def run_mypy() -> tuple[Counter[Key], list[str]]:
    # a fixed place (mypy's incremental cache keeps the paths it saw), inside the ignored cache folder
    tree = namespace_tree(ROOT / ".mypy_cache" / "namespace")
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"),
         "--cache-dir", str(ROOT / ".mypy_cache"), "--no-error-summary", "--show-absolute-path", str(tree)],
        capture_output=True, text=True, cwd=tree.parent, check=False)
    if done.returncode not in (0, 1):
        sys.exit(f"mypy did not run: {done.stderr.strip() or done.stdout.strip()}")
    found: Counter[Key] = Counter()
    shown: list[str] = []
    for raw in done.stdout.splitlines():
        m = LINE.match(raw)
        if not m:
            continue
        path = repo_path(m["path"], tree)
        found[(path, m["code"] or "misc", m["message"])] += 1
        shown.append(f"{path}:{m['line']}: [{m['code']}] {m['message']}")
    return found, shown


def check_only(files: list[str]) -> int:
    """mypy over ``files`` alone (modules outside the project that import it: a plugin, a recipe), with
    the project's settings and the namespace laid out for their imports; every error counts."""
    tree = namespace_tree(ROOT / ".mypy_cache" / "namespace")
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"),
         "--cache-dir", str(ROOT / ".mypy_cache"), "--no-error-summary", *map(os.path.abspath, files)],
        capture_output=True, text=True, cwd=tree.parent, check=False,
        env={**os.environ, "MYPYPATH": str(tree.parent)})
    if done.returncode not in (0, 1):
        sys.exit(f"mypy did not run: {done.stderr.strip() or done.stdout.strip()}")
    print(done.stdout, end="")
    return done.returncode


def read_baseline() -> Counter[Key]:
    base: Counter[Key] = Counter()
    if BASELINE.is_file():
        for line in BASELINE.read_text("utf-8").splitlines():
            if line.strip():
                count, path, code, message = line.split("\t", 3)
                base[(path, code, message)] = int(count)
    return base


def write_baseline(found: Counter[Key]) -> None:
    lines = [f"{n}\t{path}\t{code}\t{message}" for (path, code, message), n in sorted(found.items())]
    BASELINE.write_text("\n".join(lines) + ("\n" if lines else ""), "utf-8")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--update", action="store_true", help="drop fixed errors from the baseline (it may not grow)")
    parser.add_argument("--only", nargs="+", metavar="FILE", help="check these files alone, no baseline")
    args = parser.parse_args()
    if args.only:
        return check_only(args.only)
    found, shown = run_mypy()
    base = read_baseline()
    new = found - base
    fixed = base - found
    total = sum(found.values())
    if args.update and not BASELINE.exists():  # the first baseline: today's errors, to shrink from
        write_baseline(found)
        print(f"mypy baseline started: {total} error(s)")
        return 0
    if new:
        print(f"mypy: {sum(new.values())} error(s) not in the baseline ({total} in all):")
        for line in shown:
            path, _, rest = line.partition(": [")
            code, _, message = rest.partition("] ")
            if (path.rsplit(":", 1)[0], code, message) in new:
                print(f"  {line}")
        return 1
    if args.update:
        write_baseline(found)
        print(f"mypy baseline: {total} error(s) kept, {sum(fixed.values())} dropped")
        return 0
    if fixed:
        print(f"mypy: {total} error(s), all in the baseline; {sum(fixed.values())} fixed since: "
              "run `python tools/check_types.py --update` to shrink it")
    else:
        print(f"mypy: {total} error(s), all in the baseline")
    return 0


if __name__ == "__main__":
    sys.exit(main())
