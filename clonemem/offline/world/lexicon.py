"""Per-language word pools and sentence templates of the offline world (``lexicon/<lang>.json``)."""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from typing import Literal

from pydantic import BaseModel, ConfigDict

# the word pools every handler draws from: part of the offline stages' cache keys (clonemem.codehash)
CACHE_DATA = ("clonemem.offline:lexicon/en.json", "clonemem.offline:lexicon/zh.json")


class _L(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Names(_L):
    female: list[str]
    male: list[str]
    surnames: list[str]


class City(_L):
    name: str
    places: list[str]


class Occupation(_L):
    title: str
    employers: list[str]
    projects: list[str]
    education: str
    workplaces: list[str]


class Hobby(_L):
    name: str
    group: str
    activities: list[str]
    searches: list[str]


class TraitText(_L):
    high: str
    low: str


class ArcState(_L):
    state: str
    trigger: str
    cues: str
    tone: Literal["stressful", "strained", "steady", "hopeful", "relieved", "joyful"]
    facts: list[str]
    feelings: list[str]
    beliefs: list[str]


class Archetype(_L):
    key: str
    dimension: Literal["experience", "emotion", "opinion"]
    domain: str
    seeds: list[str]
    title: str
    states: list[ArcState]


class FirstPerson(_L):
    subject: str
    object: str
    possessive: str
    possessive_name_suffix: str
    reflexive: str
    pronoun_map: dict[str, str]


class Pronouns(_L):
    subj: str
    poss: str
    obj: str


class Lexicon(_L):
    language: Literal["en", "zh"]
    language_name: str
    name_order: Literal["given_family", "family_given"]
    name_joiner: str
    first_is_full_name: bool
    list_joiner: str
    and_word: str
    names: Names
    cities: list[City]
    shared_places: list[str]
    occupations: list[Occupation]
    hobbies: list[Hobby]
    traits: dict[str, TraitText]
    concerns: dict[str, list[str]]
    relation_roles: dict[str, list[str]]
    sentences: dict[str, str | dict[str, list[str]]]
    domain_focus: dict[str, str]
    domain_activities: dict[str, list[str]]
    tone_emotions: dict[str, list[str]]
    archetypes: list[Archetype]
    first_person: FirstPerson
    pronouns: dict[str, Pronouns]
    media: dict[str, dict[str, str | list[str]]]
    noise: dict[str, list[str]]

    def s(self, key: str) -> str:
        value = self.sentences[key]
        assert isinstance(value, str), key
        return value

    def archetype(self, key: str) -> Archetype | None:
        return next((a for a in self.archetypes if a.key == key), None)

    def occupation(self, title: str) -> Occupation:
        return next((o for o in self.occupations if o.title == title), self.occupations[0])

    def hobby(self, name: str) -> Hobby:
        return next((h for h in self.hobbies if h.name == name), self.hobbies[0])

    def city(self, name: str) -> City:
        return next((c for c in self.cities if c.name == name), self.cities[0])


@lru_cache(maxsize=4)
def load(language: str) -> Lexicon:
    text = (resources.files("clonemem.offline") / "lexicon" / f"{language}.json").read_text("utf-8")
    return Lexicon.model_validate(json.loads(text))
