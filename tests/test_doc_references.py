"""What the code and docs cite lives in the repository: every `*.md` document named in a source, prompt,
config, SQL or doc file exists here, and nothing cites the design brief by section (it is not part of the
product; what the product promises is in the README and docs/)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
KINDS = ("*.py", "*.md", "*.toml", "*.yaml", "*.j2", "*.sql", "*.txt")
SKIP = {".venv", ".git", "node_modules", ".mypy_cache", ".ruff_cache", "fixtures", "__pycache__"}
DOCUMENT = re.compile(r"(?<![\w/.-])([\w./-]+\.md)\b")
BRIEF = re.compile(r"\bSPEC\b|\bSTYLE\.md\b|\bDEVELOPERS\.md\b")


def files() -> list[Path]:
    out = []
    for kind in KINDS:
        out += [p for p in ROOT.rglob(kind) if not SKIP & set(p.relative_to(ROOT).parts)]
    return sorted(p for p in out if p.resolve() != Path(__file__).resolve())  # not this check's own patterns


def exists(name: str, cited_in: Path) -> bool:
    if "://" in name:
        return True
    candidates = [ROOT / name, cited_in.parent / name]
    return any(c.is_file() for c in candidates) or any(ROOT.rglob(Path(name).name))


@pytest.mark.parametrize("path", files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_cited_documents_exist(path: Path) -> None:
    text = path.read_text("utf-8", errors="replace")
    missing = sorted({m for m in DOCUMENT.findall(text) if not exists(m, path)})
    # applied migrations are frozen history (their checksums guard existing warehouses), so their comments stay
    frozen = path.parent.name == "ddl"
    brief = [] if frozen else [f"line {text.count(chr(10), 0, m.start()) + 1}: {m.group(0)}" for m in BRIEF.finditer(text)]
    assert not missing, f"{path.relative_to(ROOT)} cites documents that are not in the repository: {missing}"
    assert not brief, f"{path.relative_to(ROOT)} cites a document that is not in the repository: {brief[:10]}"


def test_the_check_sees_a_missing_document(tmp_path: Path) -> None:
    assert not exists("docs/no-such-guide.md", ROOT / "README.md")
    assert exists("docs/architecture.md", ROOT / "README.md")
    assert BRIEF.search("validator must differ from qa_writer (SPEC §2)")


def test_the_readme_layout_names_every_folder_and_module() -> None:
    """The README's layout table keeps up with the tree: every top-level folder, every sub-package of
    `clonemem/` and every module directly in it is named there."""
    readme = (ROOT / "README.md").read_text("utf-8")
    layout = readme.split("## Layout", 1)[1].split("\n## ", 1)[0]
    tracked = subprocess.run(["git", "-C", str(ROOT), "ls-files"], capture_output=True, text=True, check=True).stdout
    tops = sorted({line.split("/", 1)[0] for line in tracked.splitlines() if "/" in line} - {".ci"})
    packages = [f"clonemem/{p.name}/" for p in (ROOT / "clonemem").iterdir() if (p / "__init__.py").is_file()]
    modules = [p.name for p in (ROOT / "clonemem").glob("*.py") if p.name != "__init__.py"]
    missing = [f"{t}/" for t in tops if f"`{t}/`" not in layout]
    missing += [p for p in packages if f"`{p}`" not in layout]
    missing += [m for m in modules if f"`{m}`" not in layout and f"`clonemem/{m}`" not in layout]
    assert not missing, f"README's Layout does not name {missing}"
