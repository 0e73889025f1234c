"""Cache keys for LLM-step tasks: inputs + task source + what the inputs do not show.

A stage's output also depends on its prompt template, the model bound to its role, and, for the
offline provider, the seed and the code of the handler the stage declares (its module, the offline
helpers it imports, their lexicons). Editing a template or a handler invalidates only the tasks that
run that stage; keys never contain API keys. A memory system's results depend on its code (the
closure of its class's module, :mod:`clonemem.codehash`) and on the stages it declares in
``llm_stages``.

A key is only as good as the stages it names, so the same policies also say which stages a running
task may call (:func:`covered_stages`): the task hands that to :func:`clonemem.runtime.paid`, and a
call to any other stage (or through another role's model) is refused instead of being cached under a
key that does not cover it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from prefect.cache_policies import NO_CACHE, CachePolicy, CompoundCachePolicy
from prefect.context import TaskRunContext

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


def system_stages(system: str) -> tuple[Stage, ...]:
    """The stages memory system ``system`` declares (``llm_stages`` on its factory, read as declared:
    a factory without the attribute is an error, never "no stages", which would key its LLM-made
    results on nothing but its code)."""
    from clonemem.memory import SYSTEMS

    factory = SYSTEMS.get(system)
    try:
        stages = factory.llm_stages  # type: ignore[attr-defined]
    except AttributeError:
        raise TypeError(f"memory system {system!r}: its factory {factory!r} has no `llm_stages` (declare the "
                        "stages it calls, or `llm_stages = ()` if it calls none); its results cannot be cached "
                        "without them") from None
    if not all(isinstance(s, Stage) for s in stages):
        raise TypeError(f"memory system {system!r}: `llm_stages` must hold clonemem.stages.Stage objects")
    return tuple(stages)


@dataclass
class StagePolicy(CachePolicy):
    """Adds the stages a task runs to its cache key: the stages named here, or the one in the task's
    ``stage_name`` input; ``modules`` is code the task body runs beyond its own source."""

    stage_names: tuple[str, ...] = ()
    modules: tuple[str, ...] = ()

    def stages(self, inputs: Mapping[str, Any]) -> list[Stage]:
        names = list(self.stage_names) or ([inputs["stage_name"]] if "stage_name" in inputs else [])
        return [STAGES.get(n) for n in names]

    def compute_key(self, task_ctx: Any, inputs: dict[str, Any], flow_parameters: dict[str, Any], **kwargs: Any) -> str | None:
        parts = stage_key_parts(self.stages(inputs), runtime.current().config)
        parts += [code_hash(m) for m in self.modules]
        return stable_hash("|".join(parts))


@dataclass
class MemorySystemPolicy(CachePolicy):
    """Adds the memory system named by the task's ``system`` input: its code and its declared stages.

    Nothing is listed here: a new system (or a plugin's) is covered the moment it is registered."""

    modules: tuple[str, ...] = ()

    def stages(self, inputs: Mapping[str, Any]) -> list[Stage]:
        return list(system_stages(inputs["system"]))

    def compute_key(self, task_ctx: Any, inputs: dict[str, Any], flow_parameters: dict[str, Any], **kwargs: Any) -> str | None:
        from clonemem.memory import SYSTEMS

        factory = SYSTEMS.get(inputs["system"])
        parts = [inputs["system"], code_hash(factory.__module__)]
        parts += stage_key_parts(self.stages(inputs), runtime.current().config)
        parts += [code_hash(m) for m in self.modules]
        return stable_hash("|".join(parts))


def policy_stages(policy: CachePolicy | None, inputs: Mapping[str, Any]) -> dict[str, str] | None:
    """Stage name -> role of every stage ``policy`` keys on for these inputs; None for a policy that
    caches nothing (no key, so no restriction)."""
    if not isinstance(policy, CachePolicy) or policy == NO_CACHE:
        return None
    parts = policy.policies if isinstance(policy, CompoundCachePolicy) else [policy]
    return {s.name: s.role for p in parts if isinstance(p, (StagePolicy, MemorySystemPolicy)) for s in p.stages(inputs)}


def covered_stages() -> dict[str, str] | None:
    """The stages the running task's cache key covers (see :func:`policy_stages`), for
    :func:`clonemem.runtime.paid`; None outside a Prefect task (nothing is cached there)."""
    ctx = TaskRunContext.get()
    if ctx is None:
        return None
    return policy_stages(ctx.task.cache_policy, ctx.parameters or {})
