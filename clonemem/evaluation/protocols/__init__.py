"""The field's standard protocols, one module each, found by name.

``PROTOCOLS`` maps a protocol's name to its :class:`Protocol` subclass; a benchmark's protocols are
declared by its importer (``Importer.protocols``) and adjusted by ``[evaluation] protocols``
(:func:`selected`); other packages add protocols with an entry point in the group
``clonemem.protocols``.
"""

from __future__ import annotations

from collections.abc import Sequence

from clonemem.errors import UserError
from clonemem.evaluation.protocols.base import (
    Group,
    Prediction,
    Protocol,
    ProtocolQuestion,
    QuestionScore,
    Scope,
)
from clonemem.registry import Registry

PROTOCOLS: Registry[type[Protocol]] = Registry(
    "protocol",
    entry_point_group="clonemem.protocols",
    accepts=lambda c: isinstance(c, type) and issubclass(c, Protocol),
    expected="a Protocol subclass",
)
PROTOCOLS.add_lazy("locomo", "clonemem.evaluation.protocols.locomo:LocomoProtocol")
PROTOCOLS.add_lazy("mem0", "clonemem.evaluation.protocols.mem0:Mem0Protocol")
PROTOCOLS.add_lazy("longmemeval", "clonemem.evaluation.protocols.longmemeval:LongMemEvalProtocol")
PROTOCOLS.add_lazy("personamem", "clonemem.evaluation.protocols.personamem:PersonaMemProtocol")

__all__ = [
    "PROTOCOLS",
    "Group",
    "Prediction",
    "Protocol",
    "ProtocolQuestion",
    "ProtocolSelectionError",
    "QuestionScore",
    "Scope",
    "protocol",
    "selected",
]


class ProtocolSelectionError(ValueError, UserError):
    """``[evaluation] protocols`` mixes whole names with +/- changes, or names no registered
    protocol."""


def protocol(name: str) -> Protocol:
    """The protocol registered as ``name`` (an unknown name names the known ones)."""
    return PROTOCOLS.get(name)()


def selected(declared: Sequence[str], configured: Sequence[str] | None) -> tuple[str, ...]:
    """The protocols an evaluation computes: the importer's (``declared``) unless the config says
    otherwise. ``configured`` is either a list of names (exactly those; ``[]`` turns them all off)
    or a list of changes to the declared ones (``"+name"`` adds, ``"-name"`` drops); not both."""
    if configured is None:
        chosen = list(declared)
    else:
        changes = [c for c in configured if c[:1] in "+-" and c[:1]]
        if changes and len(changes) != len(configured):
            raise ProtocolSelectionError(
                f"[evaluation] protocols {list(configured)!r}: give either names (exactly those "
                "protocols) or "
                "changes (+name, -name) to the benchmark's own, not both"
            )
        if changes:
            chosen = list(declared)
            for change in changes:
                name = change[1:]
                if change[0] == "+" and name not in chosen:
                    chosen.append(name)
                elif change[0] == "-":
                    chosen = [c for c in chosen if c != name]
        else:
            chosen = list(dict.fromkeys(configured))
    for name in chosen:
        PROTOCOLS.get(name)  # an unknown name fails here, naming the known ones
    return tuple(chosen)
