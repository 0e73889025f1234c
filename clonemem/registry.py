"""One generic registry, used for every kind of pluggable thing (providers, offline handlers,
memory systems, ...). Entries may be registered eagerly or as lazy "module:attr" references so
optional dependencies are imported only when used.

Other packages extend a registry without touching this project: a registry created with an
``entry_point_group`` also lists the entry points of that group (``[project.entry-points."GROUP"]``
in the plugin's ``pyproject.toml``), and one created with ``allow_import_paths`` accepts a name of
the form ``package.module:Attr`` (imported on use, registered under that exact name)."""

from __future__ import annotations

import difflib
import importlib
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Generic, TypeVar

from clonemem.errors import UserError

T = TypeVar("T")


# ``package.module:Attr`` — a name that is also an import path
IMPORT_PATH = re.compile(r"[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*:[A-Za-z_][\w]*")


class RegistryError(LookupError, UserError):
    """An unknown name, or a lazy entry whose module cannot be imported."""


class Registry(Generic[T]):
    """``accepts`` checks what is registered (eagerly on ``add``, lazily when an entry is first imported),
    so a wrong object fails where it is registered, with its name, not later where it is used;
    ``expected`` says what it should have been."""

    def __init__(
        self,
        kind: str,
        entry_point_group: str | None = None,
        allow_import_paths: bool = False,
        accepts: Callable[[object], bool] | None = None,
        expected: str = "",
    ) -> None:
        self.kind = kind
        self.entry_point_group = entry_point_group
        self.allow_import_paths = allow_import_paths
        self.accepts = accepts
        self.expected = expected
        self._items: dict[str, T] = {}
        self._lazy: dict[str, tuple[str, str | None]] = {}
        self._plugins_loaded = entry_point_group is None

    def register(self, name: str) -> Callable[[T], T]:
        """Decorator: ``@REGISTRY.register("name")``."""

        def deco(obj: T) -> T:
            self.add(name, obj)
            return obj

        return deco

    def add(self, name: str, obj: T) -> None:
        if name in self._items:
            raise RegistryError(f"{self.kind} {name!r} is already registered")
        self._items[name] = self._checked(name, obj)

    def _checked(self, name: str, obj: T) -> T:
        if self.accepts is not None and not self.accepts(obj):
            raise RegistryError(
                f"{self.kind} {name!r} must be {self.expected or 'of the registry kind'}, got {obj!r}"
            )
        return obj

    def add_lazy(self, name: str, target: str, install_hint: str | None = None) -> None:
        """Register ``"package.module:attr"`` to be imported on first ``get``."""
        self._lazy[name] = (target, install_hint)

    def get(self, name: str) -> T:
        if name in self._items:
            return self._items[name]
        self._load_plugins()
        if name in self._lazy:
            target, hint = self._lazy[name]
            obj = self._import(name, target, hint)
            self._items[name] = obj
            return obj
        if self.allow_import_paths and IMPORT_PATH.fullmatch(name):
            obj = self._import(name, name, None)
            self._items[name] = obj
            return obj
        raise RegistryError(self._unknown(name))

    def _import(self, name: str, target: str, hint: str | None) -> T:
        module_name, _, attr = target.partition(":")
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            extra = f"; install it with: {hint}" if hint else ""
            raise RegistryError(
                f"{self.kind} {name!r} needs a missing dependency ({exc.name}){extra}"
            ) from exc
        try:
            obj = getattr(module, attr)
        except AttributeError:
            raise RegistryError(
                f"{self.kind} {name!r}: module {module_name!r} has no attribute {attr!r}"
            ) from None
        return self._checked(name, obj)

    def _load_plugins(self) -> None:
        """Add the entry points of this registry's group as lazy entries (once; built-ins win)."""
        if self._plugins_loaded or self.entry_point_group is None:
            return
        self._plugins_loaded = True
        from importlib.metadata import entry_points

        for ep in entry_points(group=self.entry_point_group):
            if ep.name not in self._items and ep.name not in self._lazy:
                self._lazy[ep.name] = (
                    ep.value,
                    f"reinstall the package that provides it ({ep.value})",
                )

    def _unknown(self, name: str) -> str:
        names = self.names()
        close = difflib.get_close_matches(name, names, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        return f"unknown {self.kind} {name!r}{hint} (known: {', '.join(names) or 'none'})"

    def remove(self, name: str, *, missing_ok: bool = False) -> None:
        """Forget ``name`` (eager, lazy, or an import path loaded on use): the counterpart of :meth:`add`,
        for tests and plugins that register something for a while."""
        if name not in self._items and name not in self._lazy:
            if missing_ok:
                return
            raise RegistryError(self._unknown(name))
        self._items.pop(name, None)
        self._lazy.pop(name, None)

    @contextmanager
    def added(self, name: str, obj: T) -> Iterator[T]:
        """Register ``name`` for the block and remove it after (a name already taken is refused)."""
        if name in self:
            raise RegistryError(f"{self.kind} {name!r} is already registered")
        self.add(name, obj)
        try:
            yield obj
        finally:
            self.remove(name)

    def __contains__(self, name: object) -> bool:
        self._load_plugins()
        if name in self._items or name in self._lazy:
            return True
        return (
            self.allow_import_paths
            and isinstance(name, str)
            and IMPORT_PATH.fullmatch(name) is not None
        )

    def names(self) -> list[str]:
        self._load_plugins()
        return sorted(set(self._items) | set(self._lazy))

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())
