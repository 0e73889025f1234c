"""`clonemem.plugin` is the stable plugin API: the names plugins use stay there (a pinned list: removing
one is a breaking change, made on purpose by editing this list), and the example plugin, written as a
third party would, imports nothing else of the project and type-checks against it."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import clonemem.plugin as api

ROOT = Path(__file__).parent.parent
EXAMPLE = ROOT / "examples" / "clonemem-example-plugin" / "src"

# Every name of the public surface, as released. Add to it when the API grows; never remove from it
# without a new major version of the package.
PINNED = {
    "SYSTEMS",
    "BuildContext",
    "BuildProgress",
    "LLMStep",
    "MemorySystem",
    "MemorySystemFailed",
    "MemoryTrace",
    "QuestionView",
    "Retrieved",
    "OfflineCall",
    "Role",
    "Stage",
    "define",
    "IMPORTERS",
    "ImportFailed",
    "Importer",
    "ParsedPersona",
    "Problem",
    "QuestionSource",
    "ReleaseChoice",
    "ReleaseEvidence",
    "ReleaseFile",
    "ReleasePrivacy",
    "ReleasePrivacyItem",
    "ReleaseQuestion",
    "ReleaseTrace",
    "detect_language",
    "PROVIDERS",
    "GenerateRequest",
    "GenerateResult",
    "Message",
    "ModelAPI",
    "OfflineAPI",
    "PermanentError",
    "RunConfig",
    "TransientError",
    "PROTOCOL_VERSION",
    "memory_protocol",
    "Registry",
    "RegistryError",
}
# the memory protocol's bodies, reached as `memory_protocol.NAME`
PINNED_PROTOCOL = {
    "Info",
    "ResetRequest",
    "Trace",
    "IngestRequest",
    "QueryRequest",
    "Item",
    "Items",
    "Error",
}


def test_no_pinned_name_disappears() -> None:
    gone = sorted(n for n in PINNED if n not in api.__all__ or not hasattr(api, n))
    gone += sorted(
        f"memory_protocol.{n}" for n in PINNED_PROTOCOL if not hasattr(api.memory_protocol, n)
    )
    assert not gone, f"clonemem.plugin lost names plugins use: {gone}"


def test_every_exported_name_exists_and_is_pinned() -> None:
    """`__all__` holds what the module has, and a new name is added to the pinned list with it."""
    assert [n for n in api.__all__ if not hasattr(api, n)] == []
    assert sorted(set(api.__all__) - PINNED) == []
    assert len(api.__all__) == len(set(api.__all__))


def project_imports(path: Path) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
    return {m for m in out if m == "clonemem" or m.startswith("clonemem.")}


def test_the_example_plugin_imports_only_the_plugin_api() -> None:
    files = sorted(EXAMPLE.rglob("*.py"))
    assert files
    assert {
        str(p.relative_to(EXAMPLE)): m
        for p in files
        if (m := project_imports(p) - {"clonemem.plugin"})
    } == {}
    assert project_imports(files[0].parent / "keyfacts.py") == {"clonemem.plugin"}


def test_the_check_sees_an_internal_import(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text(
        "from clonemem.memory.base import MemorySystem\nimport clonemem.plugin\n", "utf-8"
    )
    assert project_imports(module) == {"clonemem.memory.base", "clonemem.plugin"}


def test_the_example_plugin_type_checks_against_the_api() -> None:
    files = [str(p) for p in sorted(EXAMPLE.rglob("*.py"))]
    done = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "check_types.py"), "--only", *files],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
