"""What a cached result's code is: a module and every module of the same packages it imports.

Cache keys cover code this way so that nobody keeps a list of modules beside the code: a memory
system's results depend on its class's module and what that module imports (its base class, the
embedding backend, ...); an offline stage handler's on its module and the offline world's helpers it
imports. Editing any of those changes the hash; editing unrelated code does not.

Modules may also name data files their output depends on, as ``CACHE_DATA`` (``"package:path"``
entries), e.g. the offline world's lexicons; those files' bytes are part of the hash.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import threading
from functools import lru_cache
from importlib import resources

from clonemem.ids import stable_hash


def _source(name: str) -> str | None:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return None
    with open(spec.origin, encoding="utf-8") as fh:
        return fh.read()


@lru_cache(maxsize=None)
def _imports(name: str, source: str) -> frozenset[str]:
    """Absolute names of the modules ``source`` imports (relative imports resolved against ``name``).

    Cached by the source itself: the closures of the many modules hashed share most of their modules,
    and parsing each of them again for every closure took seconds; an edited module is parsed anew."""
    package = name if _is_package(name) else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            out.add(base)
            # `from pkg import module` imports a module too
            out.update(f"{base}.{alias.name}" for alias in node.names)
    return frozenset(out)


def _is_package(name: str) -> bool:
    spec = importlib.util.find_spec(name)
    return bool(spec and spec.submodule_search_locations is not None)


def _exists(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


@lru_cache(maxsize=None)
def closure(name: str, roots: tuple[str, ...] = ("clonemem",)) -> tuple[str, ...]:
    """``name`` and, transitively, every module it imports whose top-level package is in ``roots``."""
    seen: set[str] = set()
    todo = [name]
    while todo:
        mod = todo.pop()
        if mod in seen:
            continue
        source = _source(mod)
        if source is None:
            continue
        seen.add(mod)
        for dep in _imports(mod, source):
            if dep.split(".")[0] in roots and dep not in seen and _exists(dep):
                todo.append(dep)
    return tuple(sorted(seen))


def _data(module: str) -> list[str]:
    """The data files a module declares in ``CACHE_DATA``, as "name, hash of the bytes"."""
    out = []
    for entry in sorted(getattr(importlib.import_module(module), "CACHE_DATA", ())):
        package, _, path = entry.partition(":")
        out.append(
            entry + "\x00" + stable_hash((resources.files(package) / path).read_bytes().hex())
        )
    return out


_lock = (
    threading.Lock()
)  # cache keys are computed from many task threads at once; parse each module once


def code_hash(name: str, roots: tuple[str, ...] | None = None) -> str:
    """Hash of a module's closure (sources and declared data). ``roots`` defaults to the project and
    the module's own top-level package (a plugin's code counts for a plugin)."""
    with _lock:
        return _code_hash(name, roots or tuple(sorted({"clonemem", name.split(".")[0]})))


@lru_cache(maxsize=None)
def _code_hash(name: str, roots: tuple[str, ...]) -> str:
    parts = []
    for mod in closure(name, roots):
        parts += [mod, _source(mod) or "", *_data(mod)]
    return stable_hash("\x00".join(parts))
