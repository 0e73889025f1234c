"""An LLM step as data: name, prompt template, role, input and output schema, and the offline world's
handler that answers it without a model; and the registry of all of them (generation, QA, evaluation,
memory systems), which the cache policy looks stages up in.

A stage declares its offline handler where it is defined (``define(..., offline="module:function")``):
the request the stage builds carries that handler bound to the stage's typed inputs, so the offline
provider answers any stage the same way a live model answers its prompt, with no table beside it.
"""

from __future__ import annotations

import importlib
import random
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from typing import Generic, TypeVar

from pydantic import BaseModel

from clonemem import prompts
from clonemem.codehash import code_hash
from clonemem.ids import stable_hash
from clonemem.llm.model import Model
from clonemem.offline import Handler, OfflineCall
from clonemem.registry import Registry
from clonemem.schemas.config import Role

In = TypeVar("In", bound=BaseModel)  # a stage's input model
Out = TypeVar("Out", bound=BaseModel)  # a stage's output model

LANGUAGE_NAMES = {"en": "English", "zh": "Chinese (简体中文)"}

_OVERRIDES: dict[str, Handler] = {}  # stage name -> handler, while a test scripts a stage


@dataclass(frozen=True)
class Stage(Generic[In, Out]):
    name: str
    template: str
    role: Role
    inputs: type[In]
    output: type[Out]
    offline: str  # "package.module:function" of the offline handler: (OfflineCall) -> output

    def render(self, inp: In) -> prompts.Prompt:
        language = _language(inp)
        return prompts.render(
            self.template, inp=inp, language_name=LANGUAGE_NAMES.get(language, "English")
        )

    def offline_handler(self) -> Handler:
        if self.name in _OVERRIDES:
            return _OVERRIDES[self.name]
        module, _, attr = self.offline.partition(":")
        return getattr(importlib.import_module(module), attr)

    def offline_code_hash(self) -> str:
        """The offline handler's code (its module, the offline helpers it imports, their lexicons)."""
        return code_hash(self.offline.partition(":")[0])

    def run(self, model: Model, inp: In) -> Out:
        if not isinstance(inp, self.inputs):
            raise TypeError(f"{self.name} takes {self.inputs.__name__}, not {type(inp).__name__}")
        request = model.request(
            self.name,
            self.render(inp),
            schema=self.output,
            inputs_key=stable_hash(self.name + "\x00" + inp.model_dump_json()),
            offline=partial(_answer_offline, self, inp),
        )
        return model.structured(request, self.output)


def _answer_offline(
    stage: Stage, inp: BaseModel, rng: random.Random, model: str
) -> BaseModel | str:
    return stage.offline_handler()(OfflineCall(stage=stage.name, inputs=inp, rng=rng, model=model))


STAGES: Registry[Stage] = Registry(
    "stage", accepts=lambda s: isinstance(s, Stage), expected="a Stage"
)

# Where the built-in stages are defined (each module registers its stages when imported); a plugin's
# memory system declares its own stages on its class, which registers them when its module loads.
STAGE_MODULES = (
    "clonemem.generation.stages",
    "clonemem.qa.stages",
    "clonemem.evaluation.stages",
    "clonemem.memory.memsys_stages",
    "clonemem.gym.stages",
    "clonemem.evaluation.protocols.stages",
)


def all_stages() -> list[Stage]:
    """Every built-in stage (importing the modules that define them), by name."""
    for module in STAGE_MODULES:
        importlib.import_module(module)
    return [STAGES.get(n) for n in STAGES.names()]


def define(
    name: str, template: str, role: Role, inputs: type[In], output: type[Out], *, offline: str
) -> Stage[In, Out]:
    stage = Stage(name, template, role, inputs, output, offline)
    STAGES.add(name, stage)
    return stage


@contextmanager
def offline_override(name: str, handler: Handler) -> Iterator[None]:
    """Answer stage ``name`` with ``handler`` offline for the duration (tests: scripted or broken handlers)."""
    STAGES.get(name)  # unknown names fail here
    saved = _OVERRIDES.get(name)
    _OVERRIDES[name] = handler
    try:
        yield
    finally:
        if saved is None:
            _OVERRIDES.pop(name, None)
        else:
            _OVERRIDES[name] = saved


def _language(inp: BaseModel) -> str:
    for holder in (inp, getattr(inp, "segment", None)):
        language = getattr(holder, "language", None)
        if language:
            return language
    return "en"
