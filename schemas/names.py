"""Names a user gives: a benchmark's (``--name`` of the imports, a config's ``name``), a results file's
system (``evaluate --retrievals FILE --name``), a remote system's label (``--systems LABEL=URL``), the
gym's systems. A name is how the thing is found again (a leaderboard row, ``--system`` of an export), so
one check refuses what could never be told apart or typed again: nothing, only whitespace, whitespace
around it, a control character. The message is one line naming the flag or field (exit 2)."""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence

from clonemem.errors import ExitCode, UserError


class NameRefused(ValueError, UserError):
    """A name that cannot name anything (see :func:`checked_name`); its message names the flag."""

    exit_code = ExitCode.USAGE


def name_problem(value: str | None) -> str | None:
    """What makes ``value`` unusable as a name, or None when it is usable."""
    if value is None or value == "":
        return "is empty"
    if not value.strip():
        return f"is blank ({value!r}: only whitespace)"
    if value != value.strip():
        return f"has whitespace around it ({value!r}): write it without"
    if any(unicodedata.category(ch) == "Cc" for ch in value):
        return f"contains a control character ({value!r})"
    return None


def checked_name(value: str | None, where: str) -> str:
    """``value``, if it can name something; else :class:`NameRefused` saying what is wrong and ``where``
    the name came from (a flag such as ``--name``, or a config field)."""
    problem = name_problem(value)
    if problem is not None:
        raise NameRefused(f"{where}: the name {problem}")
    assert value is not None
    return value


def checked_names(items: Sequence[str], where: str) -> list[str]:
    """The names of a comma-separated option (``--systems a,b``), each checked: an empty item (``a,,b``) is
    refused too, naming its position; a ``LABEL=URL`` item's label is checked as a name."""
    names = []
    for n, item in enumerate(items, 1):
        label, eq, rest = item.partition("=")
        if eq and "://" in rest:  # a remote system: LABEL=URL (spaces around '=' allowed)
            checked_name(label.strip(), f"{where} item {n} ({item!r}), its label before '='")
            names.append(item)
        else:
            names.append(checked_name(item, f"{where} item {n}"))
    return names


def split_names(value: str, where: str) -> list[str]:
    """A comma-separated option's names (spaces after the commas allowed), each checked."""
    if not value.strip():
        raise NameRefused(f"{where}: no name given")
    return checked_names(
        [part.strip() if part.strip() else part for part in value.split(",")], where
    )
