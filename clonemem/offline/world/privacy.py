"""Stage I offline handler: the persona's privacy boundaries (which arcs are sensitive, who may know).

The offline world knows its own archetypes: each sensitive one has a category and the kinds of its
evidence that are sensitive, and who may know follows the category (a partner hears about health and
money, a friend about opinions of the workplace). Arcs of other themes are not sensitive.
"""

from __future__ import annotations

import re

from clonemem import privacy
from clonemem.ids import stable_int
from clonemem.offline import OfflineCall
from clonemem.offline.world.common import cap, fill, first_person, lexicon, persona_slots, pick
from clonemem.offline.world.qa import qa_lexicon
from clonemem.schemas import question_types
from clonemem.schemas.generation import PrivacyInput, PrivacyMatter, PrivacyOut, Relation
from clonemem.schemas.qa import (
    PrivacyDraft,
    PrivacyPlan,
    PrivacyPlanInput,
    PrivacyWriteInput,
    Segment,
    SegmentEvidence,
)

# archetype theme -> (category, sensitive kinds of its evidence)
SENSITIVE_THEMES: dict[str, tuple[str, tuple[str, ...]]] = {
    "injury_recovery": ("health", ("fact", "emotion")),
    "burnout_recovery": ("health", ("emotion",)),
    "parent_worry": ("health", ("emotion",)),
    "career_change": ("unshared_plan", ("emotion", "opinion")),
    "relocation": ("unshared_plan", ("emotion", "opinion")),
    "money_meaning": ("money", ("opinion",)),
    "work_loyalty": ("opinion_about", ("opinion",)),
}

# who hears about a matter of each category, by relation type, in order of preference (the first present)
CONFIDANTS: dict[str, tuple[str, ...]] = {
    "health": ("partner", "family"),
    "money": ("partner", "family"),
    "unshared_plan": ("partner", "friend"),
    "opinion_about": ("friend",),
    "conflict": ("friend",),
}


def _confidant(category: str, relations: list[Relation]) -> list[str]:
    for kind in CONFIDANTS[category]:
        for r in relations:
            if r.relation_type == kind:
                return [r.name]
    return []


def boundaries(call: OfflineCall) -> PrivacyOut:
    inp = call.inputs
    assert isinstance(inp, PrivacyInput)
    matters: list[PrivacyMatter] = []
    for arc in inp.arcs:
        if arc.theme not in SENSITIVE_THEMES:
            continue
        category, kinds = SENSITIVE_THEMES[arc.theme]
        matters.append(
            PrivacyMatter.model_validate(
                {
                    "key": f"S{len(matters) + 1}",
                    "category": category,
                    "arc_key": arc.key,
                    "kinds": list(kinds),
                    "subject": arc.title,
                    "may_know": _confidant(category, inp.relations),
                }
            )
        )
    return PrivacyOut(matters=matters)


# -- stage IV: privacy tasks --------------------------------------------------------------------------
#
# The offline planner reads the boundaries straight from the segment: for a recipient, an item is
# sensitive when it belongs to a matter they may not know and none of its traces reached them; it is
# necessary (for contextual disclosure) when it is in the window and not sensitive for them. Recipients
# are tried in a rotation seeded by the segment, so different segments ask different people.

# the QA wording of each language (part of these stages' cache keys, clonemem.codehash)
CACHE_DATA = ("clonemem.offline:lexicon/qa_en.json", "clonemem.offline:lexicon/qa_zh.json")


def sensitive_for(recipient: str, e: SegmentEvidence, matters: list[PrivacyMatter]) -> bool:
    return privacy.outside_scope(recipient, e.matters, e.disclosed_to, matters)


def choose(
    seg: Segment, qtype: str
) -> tuple[str, list[SegmentEvidence], list[SegmentEvidence]] | None:
    """(recipient, necessary, sensitive) for a task of ``qtype`` on ``seg``, or None when no one fits."""
    new = set(seg.new_evidence_ids)
    window = [e for e in seg.evidence if e.evidence_id in new]
    names = [r.name for r in seg.relations if r.name != seg.persona.name]
    if not names or not seg.privacy:
        return None
    start = stable_int(seg.segment_id, "recipient") % len(names)
    for recipient in names[start:] + names[:start]:
        hidden = [e for e in window if sensitive_for(recipient, e, seg.privacy)]
        if not hidden:
            continue
        shareable = [e for e in window if not sensitive_for(recipient, e, seg.privacy)]
        facts = [e for e in shareable if e.kind == "fact"] or shareable
        if question_types.spec(
            qtype
        ).adversarial:  # the request may refer to something they may know
            return recipient, facts[-1:], hidden[-2:]
        if facts:
            return recipient, facts[-2:], hidden[-2:]
    return None


def select_disclosure(seg: Segment) -> tuple[list[SegmentEvidence], str]:
    chosen = choose(seg, "contextual_disclosure")
    return (chosen[1] + chosen[2], "") if chosen else ([], "privacy")


def select_defense(seg: Segment) -> tuple[list[SegmentEvidence], str]:
    chosen = choose(seg, "boundary_defense")
    return (chosen[2], "") if chosen else ([], "privacy")


def _second_person(text: str, language: str) -> str:
    """A first-person clause addressed to the persona: "I stayed late" -> "you stayed late"."""
    text = text.strip().rstrip(".。!！")
    if language == "zh":
        return text.replace("我的", "你的").replace("我", "你")
    for first, second in (("myself", "yourself"), ("my", "your"), ("me", "you"), ("I", "you")):
        text = re.sub(rf"\b{first}\b", second, text)
    return text


def _relation_type(seg: Segment, name: str) -> str:
    return next((r.relation_type for r in seg.relations if r.name == name), "friend")


def plan(call: OfflineCall) -> PrivacyPlan:
    inp = call.inputs
    assert isinstance(inp, PrivacyPlanInput)
    seg, qa = inp.segment, qa_lexicon(inp.segment.language)
    chosen = choose(seg, inp.question_type)
    if chosen is None:
        return PrivacyPlan(
            feasible=False,
            reason=qa["privacy_plan_infeasible"],
            recipient="",
            purpose="",
            necessary_ids=[],
            sensitive_ids=[],
        )
    recipient, necessary, sensitive = chosen
    purposes = qa["privacy_purposes"]
    purpose = purposes.get(_relation_type(seg, recipient), purposes["friend"])
    return PrivacyPlan(
        feasible=True,
        recipient=recipient,
        purpose=purpose,
        reason=fill(
            qa["privacy_plan_feasible"],
            {
                "recipient": recipient,
                "necessary": str(len(necessary)),
                "sensitive": str(len(sensitive)),
            },
        ),
        necessary_ids=[e.evidence_id for e in necessary],
        sensitive_ids=[e.evidence_id for e in sensitive],
    )


def write(call: OfflineCall) -> PrivacyDraft:
    inp = call.inputs
    assert isinstance(inp, PrivacyWriteInput)
    seg, qa, rng = inp.segment, qa_lexicon(inp.segment.language), call.rng
    lex = lexicon(seg.language)
    slots = persona_slots(seg.persona, seg.relations, lex, rng)
    others = [r.name for r in seg.relations if r.name != inp.plan.recipient] or [inp.plan.recipient]
    purpose = inp.plan.purpose
    words = {
        **slots,
        "recipient": inp.plan.recipient,
        "purpose": purpose,
        "purpose_cap": cap(purpose),
        "topic": fill(qa["topics"].get(seg.arc.theme, "{hobby}"), slots),
    }
    if inp.tactic is not None:
        words["pressure"] = fill(qa["privacy_tactics"][inp.tactic], {"other": pick(rng, others)})
    # the request refers to what the recipient may know (the first necessary item), in the second person
    words["hint"] = (
        _second_person(first_person(inp.necessary[0], seg.persona, lex), seg.language)
        if inp.necessary
        else ""
    )
    words["known"] = fill(qa["privacy_known"], {"hint": words["hint"]}) if inp.necessary else ""
    request = fill(pick(rng, qa["questions"][inp.question_type]), words)
    # the lexicon's answer template of the family: what may be shared, or a refusal
    shared = " ".join(first_person(s, seg.persona, lex) for s in inp.necessary)
    response = fill(qa["answers"][inp.question_type], {"items": shared})
    return PrivacyDraft(request=request, response=response)
