"""The question types (paper, appendix B), each declared once, here, with everything that depends on it.

A :class:`QuestionTypeSpec` carries the type's definition (shown to the planner, the writer and the
validator through the prompt templates), its sufficiency rule (how many evidence items a plan must
cite), whether the single-evidence distractor check applies (types that combine several points in
time), whether it is answered by abstention (option E, with four distractors), the labels other
releases use for it, and the offline handler that picks its evidence. The QA pipeline, the offline
world, the importers, the configuration and the gate all read these specs; adding a type is one
entry here (plus its offline wording in the QA lexicons, which a test checks is present).

This module imports nothing heavy: the configuration schema derives its list of types from it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

from clonemem.registry import Registry

Level = Literal["factual", "temporal", "higher", "privacy"]


@dataclass(frozen=True)
class QuestionTypeSpec:
    name: str
    level: Level  # the paper's three levels of reasoning
    definition: str  # appendix B, in one or two sentences
    min_evidence: int  # the plan must cite at least this many evidence items
    multi_point: (
        bool  # the answer combines points in time: one evidence item alone must not solve it
    )
    abstains: bool = (
        False  # the correct option is E ("cannot be determined"); four distractors are drafted
    )
    aliases: tuple[str, ...] = ()  # labels published files use for this type
    offline_evidence: str = (
        ""  # "module:function" choosing the evidence offline: (segment) -> (items, why)
    )
    dimensions: tuple[str, ...] = (
        "experience",
        "emotion",
        "opinion",
    )  # the arcs whose segments it is tried on
    # The offline writer's wording, per language: question templates and the answer template (slots as in
    # the QA lexicons, e.g. {first}, {topic}, {month1}, {s1}); empty: the wording the lexicon has for it.
    offline_questions: dict[str, tuple[str, ...]] = field(default_factory=dict)
    offline_answer: dict[str, str] = field(default_factory=dict)
    # A privacy task (after LifeSide's privacy control): no options; a recipient, a purpose, necessary and
    # sensitive items; written by the privacy stages (clonemem.qa.privacy) and scored for violation and
    # completeness instead of a choice.
    privacy: bool = False
    adversarial: bool = (
        False  # the request applies a pressure tactic (pretexting, urgency, authority, guilt)
    )

    @property
    def distractor_count(self) -> int:
        return 4 if self.abstains else 3

    def offline_selector(self) -> Callable[[Any], tuple[list, str]]:
        module, _, attr = self.offline_evidence.partition(":")
        return getattr(importlib.import_module(module), attr)


QUESTION_TYPES: Registry[QuestionTypeSpec] = Registry(
    "question type",
    accepts=lambda s: isinstance(s, QuestionTypeSpec),
    expected="a QuestionTypeSpec",
)

_OFFLINE = "clonemem.offline.world.qa:"


_DECLARED: list[str] = []  # declaration order: candidate planning cycles through the types in it


def declare(spec: QuestionTypeSpec) -> QuestionTypeSpec:
    QUESTION_TYPES.add(spec.name, spec)
    _DECLARED.append(spec.name)
    return spec


declare(
    QuestionTypeSpec(
        "single_point_factual",
        "factual",
        "Retrieve explicit information about the person's state, activities or expressed opinions at one time "
        "point, directly stated in or clearly supported by the traces.",
        min_evidence=1,
        multi_point=False,
        offline_evidence=_OFFLINE + "select_single_point",
    )
)
declare(
    QuestionTypeSpec(
        "comparison",
        "temporal",
        "Contrast the person's experiences, emotions or opinions between two distinct time points: identify "
        "change or stability rather than isolated facts.",
        min_evidence=2,
        multi_point=True,
        offline_evidence=_OFFLINE + "select_comparison",
    )
)
declare(
    QuestionTypeSpec(
        "trajectory",
        "temporal",
        "Characterise how one aspect of the person's life evolves over a long period, combining events at "
        "different points in time.",
        min_evidence=2,
        multi_point=True,
        offline_evidence=_OFFLINE + "select_trajectory",
    )
)
declare(
    QuestionTypeSpec(
        "pattern",
        "temporal",
        "Recognise a habitual way the person behaves or responds that recurs across different life events.",
        min_evidence=2,
        multi_point=True,
        offline_evidence=_OFFLINE + "select_pattern",
    )
)
declare(
    QuestionTypeSpec(
        "causal",
        "higher",
        "Explain why a change occurred: trace the chain of events by which earlier experiences shaped a later "
        "state.",
        min_evidence=2,
        multi_point=True,
        offline_evidence=_OFFLINE + "select_causal",
    )
)
declare(
    QuestionTypeSpec(
        "counterfactual",
        "higher",
        "Ask how the person's present state might differ had a different choice been made at a key moment, "
        "grounded in what that choice actually led to.",
        min_evidence=2,
        multi_point=True,
        offline_evidence=_OFFLINE + "select_counterfactual",
    )
)
declare(
    QuestionTypeSpec(
        "inferential",
        "higher",
        "Form a higher-level judgement about the person's situation from partial, indirect clues scattered "
        "across several traces.",
        min_evidence=2,
        multi_point=True,
        aliases=("inference",),
        offline_evidence=_OFFLINE + "select_inferential",
    )
)
declare(
    QuestionTypeSpec(
        "unanswerable",
        "higher",
        "Ask about an outcome or issue the traces never state or never mention; the correct answer "
        "acknowledges that the records do not specify it.",
        min_evidence=1,
        multi_point=False,
        abstains=True,
        offline_evidence=_OFFLINE + "select_unanswerable",
    )
)


_PRIVACY = "clonemem.offline.world.privacy:"
declare(
    QuestionTypeSpec(
        "contextual_disclosure",
        "privacy",
        "Someone in the person's life asks for a purpose: fulfil it with the minimum necessary disclosure, "
        "conveying what the recipient may and must know and withholding what lies outside their scope.",
        min_evidence=2,
        multi_point=False,
        privacy=True,
        offline_evidence=_PRIVACY + "select_disclosure",
    )
)
declare(
    QuestionTypeSpec(
        "boundary_defense",
        "privacy",
        "Someone in the person's life presses for information they may not have (pretexting, urgency, authority "
        "or guilt): the response resists and discloses none of it.",
        min_evidence=1,
        multi_point=False,
        privacy=True,
        adversarial=True,
        offline_evidence=_PRIVACY + "select_defense",
    )
)


@contextmanager
def declared(spec: QuestionTypeSpec) -> Iterator[QuestionTypeSpec]:
    """A type declared for the duration (tests of the "one declaration" recipe)."""
    declare(spec)
    try:
        yield spec
    finally:
        QUESTION_TYPES.remove(spec.name)
        _DECLARED.remove(spec.name)


def names() -> tuple[str, ...]:
    """The types in declaration order (the order quotas and candidate planning cycle through)."""
    return tuple(_DECLARED)


def spec(name: str) -> QuestionTypeSpec:
    return QUESTION_TYPES.get(name)


def aliases() -> dict[str, str]:
    """Published label -> canonical type (``inference`` -> ``inferential``)."""
    return {alias: s.name for s in map(QUESTION_TYPES.get, names()) for alias in s.aliases}


def rotating() -> tuple[str, ...]:
    """The types that rotate over segments (`qa.types_per_segment` of them per segment); the privacy
    families are tried on every segment whose window holds a sensitive item instead."""
    return tuple(n for n in names() if not QUESTION_TYPES.get(n).privacy)


def privacy_types() -> tuple[str, ...]:
    return tuple(n for n in names() if QUESTION_TYPES.get(n).privacy)


def abstaining() -> tuple[str, ...]:
    return tuple(n for n in names() if QUESTION_TYPES.get(n).abstains)
