"""The places that lean on a library's internals (a patched method, a private attribute) say which
version of the library they were written for, and refuse any other before touching it.

Internals change without notice between releases; a patch applied to a version it was not written
for would fail later, somewhere else, or silently do the wrong thing. Each such place calls
:func:`written_for` first, which fails with one line naming the package, the version it needs and the
version installed. The pins in pyproject.toml and constraints.txt are those versions.
"""

from __future__ import annotations

from importlib import metadata

from clonemem.errors import UserError

_checked: set[tuple[str, str]] = set()


class UnsupportedLibraryVersion(RuntimeError, UserError):
    """A library whose internals the project relies on is installed in another version."""


def installed(package: str) -> str | None:
    """The installed version of ``package`` (None: not installed)."""
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def written_for(package: str, version: str, what: str) -> None:
    """Refuse to go on unless ``package`` is installed at exactly ``version``, which ``what`` (the
    code using its internals) was written for."""
    if (package, version) in _checked:
        return
    found = installed(package)
    if found != version:
        raise UnsupportedLibraryVersion(
            f"{what} relies on the internals of {package} {version}, but {package} "
            f"{found or '(none)'} is installed: install {package}=={version} (constraints.txt)"
        )
    _checked.add((package, version))
