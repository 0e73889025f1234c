"""What the code and docs cite lives in the repository: every `*.md` document named in a source, prompt,
config, SQL or doc file exists here, and nothing cites the design brief by section (it is not part of the
product; what the product promises is in the README and docs/)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).parent.parent
KINDS = ("*.py", "*.md", "*.toml", "*.yaml", "*.j2", "*.sql", "*.txt")
SKIP = {".venv", ".git", "node_modules", ".mypy_cache", ".ruff_cache", "fixtures", "__pycache__"}
DOCUMENT = re.compile(r"(?<![\w/.-])([\w./-]+\.md)\b")
BRIEF = re.compile(r"\bSPEC\b|\bSTYLE\.md\b|\bDEVELOPERS\.md\b")


def files() -> list[Path]:
    out = []
    for kind in KINDS:
        out += [p for p in ROOT.rglob(kind) if not SKIP & set(p.relative_to(ROOT).parts)]
    return sorted(
        p for p in out if p.resolve() != Path(__file__).resolve()
    )  # not this check's own patterns


def exists(name: str, cited_in: Path) -> bool:
    """The document is at that path from the repository's root or from the citing file's folder (a
    file of the same name elsewhere is not it)."""
    if "://" in name:
        return True
    return (ROOT / name).is_file() or (cited_in.parent / name).is_file()


def problems(path: Path) -> list[str]:
    """What ``path`` cites that is not in the repository: missing documents, and the design brief."""
    text = path.read_text("utf-8", errors="replace")
    missing = sorted({m for m in DOCUMENT.findall(text) if not exists(m, path)})
    # applied migrations are frozen history (their checksums guard existing warehouses), so their comments stay
    frozen = path.parent.name == "ddl"
    brief = (
        []
        if frozen
        else [
            f"line {text.count(chr(10), 0, m.start()) + 1}: {m.group(0)}"
            for m in BRIEF.finditer(text)
        ]
    )
    return [f"no such document: {m}" for m in missing] + [f"cites the brief, {b}" for b in brief]


def test_cited_documents_exist() -> None:
    wrong = {str(p.relative_to(ROOT)): w for p in files() if (w := problems(p))}
    assert not wrong, f"documents cited but not in the repository: {wrong}"


def test_the_check_sees_a_missing_document(tmp_path: Path) -> None:
    assert not exists("docs/no-such-guide.md", ROOT / "README.md")
    assert not exists(
        "docs/README.md", ROOT / "README.md"
    )  # a README.md elsewhere is not docs/README.md
    assert exists("docs/architecture.md", ROOT / "README.md")
    assert exists("architecture.md", ROOT / "docs" / "memory-protocol.md")  # beside the citing file
    assert BRIEF.search("validator must differ from qa_writer (SPEC §2)")
    cites = tmp_path / "cites.md"
    cites.write_text("see docs/nowhere.md and SPEC §2\n", "utf-8")
    assert problems(cites) == ["no such document: docs/nowhere.md", "cites the brief, line 1: SPEC"]


def test_the_readme_layout_names_every_folder_and_module() -> None:
    """The README's layout table keeps up with the tree: every top-level folder, every sub-package of
    `clonemem/` and every module directly in it is named there."""
    readme = (ROOT / "README.md").read_text("utf-8")
    layout = readme.split("## Layout", 1)[1].split("\n## ", 1)[0]
    tracked = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files"], capture_output=True, text=True, check=True
    ).stdout
    tops = sorted({line.split("/", 1)[0] for line in tracked.splitlines() if "/" in line} - {".ci"})
    packages = [
        f"clonemem/{p.name}/"
        for p in (ROOT / "clonemem").iterdir()
        if (p / "__init__.py").is_file()
    ]
    modules = [p.name for p in (ROOT / "clonemem").glob("*.py") if p.name != "__init__.py"]
    missing = [f"{t}/" for t in tops if f"`{t}/`" not in layout]
    missing += [p for p in packages if f"`{p}`" not in layout]
    missing += [m for m in modules if f"`{m}`" not in layout and f"`clonemem/{m}`" not in layout]
    assert not missing, f"README's Layout does not name {missing}"
