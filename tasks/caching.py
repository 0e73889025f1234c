"""Cache keys for LLM-step tasks: inputs + task source + what the inputs do not show.

A stage's output also depends on its prompt template, the model bound to its role, and, for the
offline provider, the seed and the code of the handler the stage declares (its module, the offline
helpers it imports, their lexicons). Editing a template or a handler invalidates only the tasks that
run that stage; keys never contain API keys. A memory system's results depend on its code (the
closure of its class's module, :mod:`clonemem.codehash`) and on the stages it declares.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from prefect.cache_policies import CachePolicy

from clonemem import prompts, runtime
from clonemem.codehash import code_hash
from clonemem.ids import stable_hash
from clonemem.schemas.config import RunConfig
from clonemem.stages import STAGES, Stage


def stage_key_parts(stages: Iterable[Stage], config: RunConfig) -> list[str]:
    parts = []
    for stage in stages:
        ref = config.models.ref(stage.role)
        parts += [stage.name, str(ref), prompts.template_hash(stage.template)]
        if ref.provider == "offline":
            parts += [str(config.seed), stage.offline_code_hash()]
    return parts


@dataclass
class StagePolicy(CachePolicy):
    """Adds the stages a task runs to its cache key: the stages named here, or the one in the task's
    ``stage_name`` input; ``modules`` is code the task body runs beyond its own source."""

    stage_names: tuple[str, ...] = ()
    modules: tuple[str, ...] = ()

    def compute_key(self, task_ctx: Any, inputs: dict[str, Any], flow_parameters: dict[str, Any], **kwargs: Any) -> str | None:
        names = list(self.stage_names) or ([inputs["stage_name"]] if "stage_name" in inputs else [])
        parts = stage_key_parts(map(STAGES.get, names), runtime.current().config)
        parts += [code_hash(m) for m in self.modules]
        return stable_hash("|".join(parts))


@dataclass
class MemorySystemPolicy(CachePolicy):
    """Adds the memory system named by the task's ``system`` input: its code and its declared stages.

    Nothing is listed here: a new system (or a plugin's) is covered the moment it is registered."""

    modules: tuple[str, ...] = ()

    def compute_key(self, task_ctx: Any, inputs: dict[str, Any], flow_parameters: dict[str, Any], **kwargs: Any) -> str | None:
        from clonemem.memory import SYSTEMS

        factory = SYSTEMS.get(inputs["system"])
        parts = [inputs["system"], code_hash(factory.__module__)]
        parts += stage_key_parts(getattr(factory, "llm_stages", ()), runtime.current().config)
        parts += [code_hash(m) for m in self.modules]
        return stable_hash("|".join(parts))
