"""An LLM step as data: name, prompt template, role, input and output schema; and the registry of all of
them (generation, QA, evaluation), which the offline provider and the cache policy look stages up in."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

from pydantic import BaseModel

from clonemem import prompts
from clonemem.llm.model import Model
from clonemem.registry import Registry
from clonemem.schemas.config import Role

I = TypeVar("I", bound=BaseModel)
O = TypeVar("O", bound=BaseModel)

LANGUAGE_NAMES = {"en": "English", "zh": "Chinese (简体中文)"}


@dataclass(frozen=True)
class Stage(Generic[I, O]):
    name: str
    template: str
    role: Role
    inputs: type[I]
    output: type[O]

    def render(self, inp: I) -> prompts.Prompt:
        language = _language(inp)
        return prompts.render(self.template, inp=inp, language_name=LANGUAGE_NAMES.get(language, "English"))

    def run(self, model: Model, inp: I) -> O:
        if not isinstance(inp, self.inputs):
            raise TypeError(f"{self.name} takes {self.inputs.__name__}, not {type(inp).__name__}")
        return model.structured(model.request(self.name, self.render(inp), inp, self.output), self.output)


STAGES: Registry[Stage] = Registry("stage")


def define(name: str, template: str, role: Role, inputs: type[BaseModel], output: type[BaseModel]) -> Stage:
    stage = Stage(name, template, role, inputs, output)
    STAGES.add(name, stage)
    return stage


def _language(inp: BaseModel) -> str:
    for holder in (inp, getattr(inp, "segment", None)):
        language = getattr(holder, "language", None)
        if language:
            return language
    return "en"
