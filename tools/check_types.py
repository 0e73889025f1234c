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
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

from clonemem.layout import MAPPED

ROOT = Path(__file__).resolve().parents[1]
BASELINE = ROOT / "tools" / "mypy-baseline.txt"
LINE = re.compile(r"^(?P<path>[^:]+):(?P<line>\d+): error: (?P<message>.*?)(?:  \[(?P<code>[\w-]+)\])?$")

Key = tuple[str, str, str]  # (path in the repository, error code, message)


def namespace_tree(into: Path, overlay: dict[str, str] | None = None) -> Path:
    """``into/clonemem``: the package as installed, each entry a link into the repository. ``overlay``
    (a module's path in the package, e.g. ``dashboard/views/new.py`` -> its text) adds or replaces
    files in the tree only: the folders on their way become real folders of links."""
    pkg = into / "clonemem"
    if pkg.exists():
        shutil.rmtree(pkg)
    pkg.mkdir(parents=True)
    for entry in (ROOT / "clonemem").iterdir():
        if entry.name != "__pycache__":
            (pkg / entry.name).symlink_to(entry)
    for name in MAPPED:
        (pkg / name).symlink_to(ROOT / name)
    for rel, text in (overlay or {}).items():
        target = pkg / rel
        for folder in reversed(target.relative_to(pkg).parents[:-1]):
            _unfold(pkg / folder)
        target.unlink(missing_ok=True)
        target.write_text(text, "utf-8")
    return pkg


def shared_tree() -> Path:
    """The namespace tree of the repository as it is, for every check that needs one: built once per
    set of entries (its folder is named by them), atomically, and never removed while another check
    may be reading it (`make lint` and the recipe tests may run at once)."""
    entries = sorted(e.name for e in (ROOT / "clonemem").iterdir() if e.name != "__pycache__")
    key = hashlib.sha256("\n".join([*entries, *MAPPED]).encode()).hexdigest()[:12]
    final = ROOT / ".mypy_cache" / f"namespace-{key}"
    if not final.exists():
        final.parent.mkdir(parents=True, exist_ok=True)
        building = Path(tempfile.mkdtemp(prefix="namespace-", dir=final.parent))
        namespace_tree(building)
        try:
            building.rename(final)
        except OSError:  # another check built it meanwhile: use theirs
            shutil.rmtree(building, ignore_errors=True)
    return final / "clonemem"


def _unfold(folder: Path) -> None:
    """A linked folder becomes a real one holding links to its entries."""
    if not folder.is_symlink():
        return
    source = folder.resolve()
    folder.unlink()
    folder.mkdir()
    for entry in source.iterdir():
        if entry.name != "__pycache__":
            (folder / entry.name).symlink_to(entry)


def repo_path(path: str, tree: Path) -> str:
    """``<tmp>/clonemem/flows/x.py`` -> ``flows/x.py``; ``<tmp>/clonemem/cli.py`` -> ``clonemem/cli.py``."""
    prefix = str(tree) + "/"
    # mypy's cache may name a module by a tree it saw before (another namespace-* folder)
    earlier = re.search(r"/\.mypy_cache/namespace[^/]*/clonemem/(.*)$", path)
    inside = path[len(prefix):] if path.startswith(prefix) else earlier[1] if earlier else path
    parts = Path(inside).parts
    return "/".join(parts if parts and parts[0] in MAPPED else ("clonemem", *parts))


def run_mypy() -> tuple[Counter[Key], list[str]]:
    # a fixed place (mypy's incremental cache keeps the paths it saw), inside the ignored cache folder
    tree = shared_tree()
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


def mypy_only(files: list[str], tree: Path, cache: Path) -> subprocess.CompletedProcess[str]:
    """mypy over ``files`` alone, with the project's settings, ``tree`` (a :func:`namespace_tree`) for
    their imports of the package, and its cache in ``cache``."""
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"),
         "--cache-dir", str(cache), "--no-error-summary", *map(os.path.abspath, files)],
        capture_output=True, text=True, cwd=tree.parent, check=False,
        env={**os.environ, "MYPYPATH": str(tree.parent)})


def check_only(files: list[str]) -> int:
    """mypy over ``files`` alone (modules outside the project that import it: a plugin, a recipe), with
    the project's settings and the namespace laid out for their imports; every error counts."""
    done = mypy_only(files, shared_tree(), ROOT / ".mypy_cache")
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
