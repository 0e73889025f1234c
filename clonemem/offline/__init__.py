"""The offline world: deterministic handlers, one per stage, that build each stage's output from
its structured inputs. Each stage names its handler where it is defined
(``clonemem.stages.define(..., offline=...)``); this package holds what handlers share."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from pydantic import BaseModel


@dataclass(frozen=True)
class OfflineCall:
    """What a handler sees: the stage's typed inputs and a generator seeded by (seed, stage, inputs)."""

    stage: str
    inputs: BaseModel | None
    rng: random.Random
    model: str


Handler = Callable[[OfflineCall], BaseModel | str]


class ScriptExhausted(RuntimeError):
    """A scripted handler was called more times than it has outputs."""


def scripted(outputs: Iterable[BaseModel | str]) -> Handler:
    """A handler that replays fixed outputs in order and fails loudly when they run out."""
    queue = list(outputs)

    def handler(call: OfflineCall) -> BaseModel | str:
        if not queue:
            raise ScriptExhausted(f"scripted handler for {call.stage!r} has no outputs left")
        return queue.pop(0)

    return handler
