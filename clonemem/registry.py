"""One generic registry, used for every kind of pluggable thing (providers, offline handlers,
memory systems, ...). Entries may be registered eagerly or as lazy "module:attr" references so
optional dependencies are imported only when used."""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Generic, TypeVar

T = TypeVar("T")


class RegistryError(LookupError):
    """An unknown name, or a lazy entry whose module cannot be imported."""


class Registry(Generic[T]):
    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._items: dict[str, T] = {}
        self._lazy: dict[str, tuple[str, str | None]] = {}

    def register(self, name: str) -> Callable[[T], T]:
        """Decorator: ``@REGISTRY.register("name")``."""

        def deco(obj: T) -> T:
            self.add(name, obj)
            return obj

        return deco

    def add(self, name: str, obj: T) -> None:
        if name in self._items:
            raise RegistryError(f"{self.kind} {name!r} is already registered")
        self._items[name] = obj

    def add_lazy(self, name: str, target: str, install_hint: str | None = None) -> None:
        """Register ``"package.module:attr"`` to be imported on first ``get``."""
        self._lazy[name] = (target, install_hint)

    def get(self, name: str) -> T:
        if name in self._items:
            return self._items[name]
        if name in self._lazy:
            target, hint = self._lazy[name]
            module_name, _, attr = target.partition(":")
            try:
                module = importlib.import_module(module_name)
            except ImportError as exc:
                extra = f"; install it with: {hint}" if hint else ""
                raise RegistryError(f"{self.kind} {name!r} needs a missing dependency ({exc.name}){extra}") from exc
            obj = getattr(module, attr)
            self._items[name] = obj
            return obj
        raise RegistryError(self._unknown(name))

    def _unknown(self, name: str) -> str:
        names = self.names()
        close = difflib.get_close_matches(name, names, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        return f"unknown {self.kind} {name!r}{hint} (known: {', '.join(names) or 'none'})"

    @contextmanager
    def override(self, name: str, obj: T) -> Iterator[None]:
        """Temporarily bind ``name`` to ``obj`` (tests use this for scripted handlers)."""
        saved = self._items.get(name)
        self._items[name] = obj
        try:
            yield
        finally:
            if saved is None:
                self._items.pop(name, None)
            else:
                self._items[name] = saved

    def __contains__(self, name: object) -> bool:
        return name in self._items or name in self._lazy

    def names(self) -> list[str]:
        return sorted(set(self._items) | set(self._lazy))

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())
