"""Running the gym for one (assistant, persona): the assistant made from its name, then the on-policy
interaction or the off-policy replay of a reference transcript."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass

from clonemem.evaluation.run import system_work
from clonemem.gym import interact as I
from clonemem.memory import SYSTEMS
from clonemem.memory.base import BuildContext, LLMStep, Retrieved, declared_only, declared_stages
from clonemem.schemas import gym as G
from clonemem.schemas.config import ConfigError, GymConfig


def check_systems(names: Sequence[str], reference: str) -> None:
    """Every name is a registered memory system or a gym control; refused before anything runs."""
    known = set(SYSTEMS.names()) | set(I.CONTROLS)
    for name in [*names, reference]:
        if "://" in name:
            raise ConfigError(
                f"{name!r}: remote memory systems are evaluated with `clonemem evaluate`; the gym "
                "runs registered systems (or package.module:Class) and its controls"
            )
        if name not in known and ":" not in name:
            raise ConfigError(
                f"unknown system {name!r} for the gym (memory systems: {', '.join(SYSTEMS.names())}; "
                f"controls: {', '.join(I.CONTROLS)})"
            )
    if not names:
        raise ConfigError("--systems: name at least one system")
    if len(set(names)) != len(names):
        raise ConfigError("--systems: a system is named twice")


@dataclass
class _Guarded:
    """A memory assistant whose own code's failures are the system's (``MemorySystemFailed``, exit 5)."""

    inner: I.MemoryAssistant
    system: str

    def observe(self, turns: Sequence[I.Turn]) -> None:
        with system_work(self.system, "ingest"):
            self.inner.observe(turns)

    def recall(self, query_id: str, query: str, at: dt.datetime, k: int) -> list[Retrieved]:
        with system_work(self.system, "retrieve"):
            return self.inner.recall(query_id, query, at, k)

    def stored(self, at: dt.datetime) -> list[Retrieved] | None:
        with system_work(self.system, "stored"):
            return self.inner.stored(at)


def assistant(
    system: str, blueprint: G.Blueprint, extractor: LLMStep, seed: int, full_context_tokens: int
) -> I.Assistant:
    if system == I.ORACLE_STATES:
        return I.StatesAssistant(blueprint)
    if system == I.NO_MEMORY:
        return I.NoMemory()
    with system_work(system, "start"):
        memory = SYSTEMS.get(system)()
        ctx = BuildContext(
            llm=declared_only(system, declared_stages(system), extractor),
            language=blueprint.language,
            seed=seed,
            full_context_tokens=full_context_tokens,
            persona_id=blueprint.persona_id,
        )
        return _Guarded(I.MemoryAssistant(memory, ctx), system)


def run_one(
    system: str,
    blueprint: G.Blueprint,
    llm: I.LLM,
    extractor: LLMStep,
    gym: GymConfig,
    seed: int,
    full_context_tokens: int,
    transcript: Sequence[I.Turn] | None = None,
) -> I.Interaction:
    """On-policy with the simulated user, or, given ``transcript``, off-policy on it."""
    helper = assistant(system, blueprint, extractor, seed, full_context_tokens)
    if transcript is None:
        return I.interact(blueprint, helper, llm, gym, system)
    return I.replay(blueprint, helper, llm, gym, system, transcript)
