"""Shared machinery of the offline world: slots, template filling, first-person rewriting."""

from __future__ import annotations

import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from clonemem.offline.world.lexicon import Archetype, Lexicon, load
from clonemem.schemas.generation import ArcBrief, PersonaBrief, Relation


class _Slots(dict):
    def __missing__(self, key: str) -> str:
        raise KeyError(f"offline template slot {{{key}}} has no value")


def fill(template: str, slots: Mapping[str, object]) -> str:
    return template.format_map(_Slots(slots))


def cap(text: str) -> str:
    return text[:1].upper() + text[1:] if text else text


T = TypeVar("T")


def pick(rng: random.Random, items: Sequence[T]) -> T:
    """One of ``items``, drawn by ``rng`` (strings, lexicon entries, arcs: whatever the list holds)."""
    return items[rng.randrange(len(items))]


def first_name(brief: PersonaBrief, lex: Lexicon) -> str:
    """How statements about the persona name them: the given name, or the full name (zh)."""
    if lex.first_is_full_name:
        return brief.name
    parts = brief.name.split(lex.name_joiner) if lex.name_joiner else [brief.name]
    return parts[0] if lex.name_order == "given_family" else parts[-1]


@dataclass(frozen=True)
class People:
    """Who fills the recurring roles in templates, taken from the persona's relations."""

    partner: str
    friend: str
    manager: str
    family_member: str
    colleague: str
    everyone: tuple[str, ...]

    @classmethod
    def of(cls, relations: Sequence[Relation]) -> People:
        def first(kind: str, role_words: tuple[str, ...] = ()) -> str | None:
            for r in relations:
                if r.relation_type == kind and (
                    not role_words or any(w in r.role for w in role_words)
                ):
                    return r.name
            return None

        names = tuple(r.name for r in relations) or ("a friend",)
        friend = first("friend") or names[0]
        return cls(
            partner=first("partner") or friend,
            friend=friend,
            manager=first("colleague", ("manager", "经理", "主管", "上司"))
            or first("colleague")
            or friend,
            family_member=first("family") or friend,
            colleague=first("colleague") or friend,
            everyone=names,
        )


def persona_slots(
    brief: PersonaBrief, relations: Sequence[Relation], lex: Lexicon, rng: random.Random
) -> dict[str, str]:
    """Every slot a template may use, for this persona; random ones drawn from ``rng``."""
    occ = lex.occupation(brief.occupation)
    hobby = lex.hobby(brief.interests[0] if brief.interests else "")
    city = lex.city(brief.city)
    people = People.of(relations)
    pron = lex.pronouns[brief.gender]
    new_employer = next((e for e in occ.employers if e != brief.employer), occ.employers[-1])
    return {
        "name": brief.name,
        "first": first_name(brief, lex),
        "subj": pron.subj,
        "poss": pron.poss,
        "obj": pron.obj,
        "employer": brief.employer,
        "new_employer": new_employer,
        "project": pick(rng, occ.projects),
        "workplace": pick(rng, occ.workplaces),
        "city": brief.city,
        "place": pick(rng, city.places),
        "shared_place": pick(rng, lex.shared_places),
        "hobby": hobby.name,
        "hobby_tag": re.sub(r"\W+", "", hobby.name),
        "city_tag": re.sub(r"\W+", "", brief.city),
        "group": hobby.group,
        "hobby_activity": pick(rng, hobby.activities),
        "partner": people.partner,
        "friend": people.friend,
        "manager": people.manager,
        "family_member": people.family_member,
        "colleague": people.colleague,
        "person": pick(rng, people.everyone),
    }


def with_article(noun: str, lex: Lexicon) -> str:
    if lex.language != "en":
        return noun
    return ("an " if noun[:1].lower() in "aeiou" else "a ") + noun


def archetype_of(theme: str, lex: Lexicon) -> Archetype:
    """The archetype an arc came from; arcs written by another model fall back to the first of their dimension."""
    return lex.archetype(theme) or lex.archetypes[0]


def arc_state(arc: ArcBrief, lex: Lexicon, index: int | None = None):
    arche = archetype_of(arc.theme, lex)
    i = arc.current_index if index is None else index
    return arche, arche.states[max(0, min(i, len(arche.states) - 1))]


def first_person(statement: str, brief: PersonaBrief, lex: Lexicon) -> str:
    """Rewrite a third-person statement about the persona in the persona's own voice.

    Offline templates name the persona only as the subject or in the possessive, and use pronouns
    only for the persona, which is what makes this rewrite safe.
    """
    fp = lex.first_person
    text = statement
    for name in {brief.name, first_name(brief, lex)}:
        text = (
            text.replace(name + fp.possessive_name_suffix, fp.possessive)
            if fp.possessive_name_suffix
            else text
        )
    for name in sorted({brief.name, first_name(brief, lex)}, key=len, reverse=True):
        if lex.language == "en":
            text = re.sub(rf"(^|(?<=[.!?]\s)){re.escape(name)}\b", fp.subject, text)
            text = re.sub(rf"\b{re.escape(name)}\b", fp.object, text)
        else:
            text = text.replace(name, fp.subject)
    padded = f" {text} "
    for third, first in fp.pronoun_map.items():
        padded = padded.replace(third, first)
    text = padded.strip()
    if lex.language == "en":
        text = re.sub(r"\bI's\b", "my", text)
    return text


def lexicon(language: str) -> Lexicon:
    return load(language)


def join_list(items: Sequence[str], lex: Lexicon) -> str:
    items = list(items)
    if len(items) <= 1:
        return "".join(items)
    return lex.list_joiner.join(items[:-1]) + lex.and_word + items[-1]
