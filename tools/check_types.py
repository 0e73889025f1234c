"""mypy (with the pydantic plugin) over every package of the project: any error fails the check.

The project's folders are sub-packages of one ``clonemem`` namespace through ``package-dir`` in
pyproject.toml, a mapping mypy cannot read. The check therefore lays out the namespace as symlinks in
a temporary folder and points mypy at it. There is no baseline: the code is typed to zero errors.

    python tools/check_types.py                  # exit 1 on any error, each one listed
    python tools/check_types.py --only F.py ...  # these files alone (e.g. a plugin's modules, outside
                                                 # the project), every error shown
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
LINE = re.compile(
    r"^(?P<path>[^:]+):(?P<line>\d+): error: (?P<message>.*?)(?:  \[(?P<code>[\w-]+)\])?$"
)

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
    inside = path[len(prefix) :] if path.startswith(prefix) else earlier[1] if earlier else path
    parts = Path(inside).parts
    return "/".join(parts if parts and parts[0] in MAPPED else ("clonemem", *parts))


def run_mypy() -> tuple[Counter[Key], list[str]]:
    # a fixed place (mypy's incremental cache keeps the paths it saw), inside the ignored cache folder
    tree = shared_tree()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--config-file",
            str(ROOT / "pyproject.toml"),
            "--cache-dir",
            str(ROOT / ".mypy_cache"),
            "--no-error-summary",
            "--show-absolute-path",
            str(tree),
        ],
        capture_output=True,
        text=True,
        cwd=tree.parent,
        check=False,
    )
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
        [
            sys.executable,
            "-m",
            "mypy",
            "--config-file",
            str(ROOT / "pyproject.toml"),
            "--cache-dir",
            str(cache),
            "--no-error-summary",
            *map(os.path.abspath, files),
        ],
        capture_output=True,
        text=True,
        cwd=tree.parent,
        check=False,
        env={**os.environ, "MYPYPATH": str(tree.parent)},
    )


def check_only(files: list[str]) -> int:
    """mypy over ``files`` alone (modules outside the project that import it: a plugin, a recipe), with
    the project's settings and the namespace laid out for their imports; every error counts."""
    done = mypy_only(files, shared_tree(), ROOT / ".mypy_cache")
    if done.returncode not in (0, 1):
        sys.exit(f"mypy did not run: {done.stderr.strip() or done.stdout.strip()}")
    print(done.stdout, end="")
    return done.returncode


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", metavar="FILE", help="check these files alone")
    args = parser.parse_args()
    if args.only:
        return check_only(args.only)
    _, shown = run_mypy()
    if shown:
        print(f"mypy: {len(shown)} error(s):")
        for line in shown:
            print(f"  {line}")
        return 1
    print("mypy: no errors")
    return 0


if __name__ == "__main__":
    sys.exit(main())
