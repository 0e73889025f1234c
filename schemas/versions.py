"""Versions of the formats the project writes (the release files, the results file, `evaluate --json`,
`gym --json`): each document carries ``format_version``, "MAJOR.MINOR".

A minor version adds optional fields, which older readers ignore; a major version changes what
existing fields mean. So a reader accepts its own major version at any minor (and a document without
the field: one written before versions, i.e. version 1.0), and refuses any other major version with
one line naming the document and the version, before reading further.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from clonemem.errors import UserError

FIELD = "format_version"
_VERSION = re.compile(r"(\d+)\.(\d+)")

M = TypeVar("M", bound=BaseModel)


class FormatError(ValueError, UserError):
    """A document of a written format that cannot be read; the message is one line: where and why."""


class FormatVersionError(FormatError):
    """A document in a major version this code cannot read (or a version that is not MAJOR.MINOR)."""


@dataclass(frozen=True)
class Format:
    """One written format: its name in messages and the version this code writes."""

    name: str
    version: str

    @property
    def major(self) -> int:
        return int(self.version.split(".")[0])

    def problem(self, found: object) -> str | None:
        """Why a document with ``format_version`` ``found`` cannot be read (None: it can)."""
        if found is None:
            return None  # written before formats carried versions: 1.0
        match = _VERSION.fullmatch(found) if isinstance(found, str) else None
        if match is None:
            return f"{FIELD} {json.dumps(found)} is not MAJOR.MINOR (this clonemem writes {self.version})"
        if int(match[1]) != self.major:
            return (
                f"{self.name} {FIELD} {found} is not supported: this clonemem reads "
                f"{self.name} {self.major}.x (it writes {self.version})"
            )
        return None

    def check(self, found: object, where: str) -> None:
        """Raise :class:`FormatVersionError` ``where: why`` when ``found`` cannot be read."""
        if (why := self.problem(found)) is not None:
            raise FormatVersionError(f"{where}: {why}")

    def check_document(self, doc: object, where: str) -> None:
        """The check on a parsed JSON document (a non-object has no version to check)."""
        if isinstance(doc, Mapping):
            self.check(doc.get(FIELD), where)

    def read(self, path: str | Path, model: type[M]) -> M:
        """A whole JSON document of this format: the version checked first, then the model (which
        decides about fields it does not know)."""
        where = str(path)
        try:
            doc = json.loads(Path(path).read_text("utf-8"))
        except (OSError, ValueError) as exc:
            raise FormatError(f"{where}: cannot read the {self.name}: {exc}") from None
        self.check_document(doc, where)
        try:
            return model.model_validate(doc)
        except ValidationError as exc:
            err = exc.errors()[0]
            loc = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err["loc"])
            raise FormatError(f"{where}: ${loc}: {err['msg']}") from None


RELEASE = Format("release file", "1.0")
RESULTS_FILE = Format("results file", "1.0")
EVALUATION = Format("evaluation result", "1.1")  # `evaluate --json` (1.1: systems' retrieval_mode)
GYM = Format("gym report", "1.0")  # `gym --json`
