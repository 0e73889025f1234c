"""Cache keys for LLM-step tasks: inputs + task source + what the inputs do not show.

A stage's output also depends on its prompt template, the model bound to its role, and, for the
offline provider, the seed and the handler code and lexicon. Editing a template invalidates only
the tasks that render it; keys never contain API keys.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

from prefect.cache_policies import CachePolicy

from clonemem import prompts, runtime
from clonemem.stages import STAGES
from clonemem.ids import stable_hash


@lru_cache(maxsize=1)
def offline_code_hash() -> str:
    """The offline world's code and lexicons: editing any of them invalidates offline results."""
    root = resources.files("clonemem.offline")
    files = [e for e in root.iterdir() if e.name.endswith(".py")]
    files += [e for e in (root / "world").iterdir() if e.name.endswith(".py")]
    files += [e for e in (root / "lexicon").iterdir() if e.name.endswith(".json")]
    return stable_hash("".join(f.name + f.read_text("utf-8") for f in sorted(files, key=lambda f: f.name)))


@dataclass
class StagePolicy(CachePolicy):
    """Adds the template hash and the role's model binding of the stages a task runs to its cache key:
    the stages named here, or the one in the task's ``stage_name`` input."""

    stage_names: tuple[str, ...] = ()
    modules: tuple[str, ...] = ()  # code the task body runs beyond its own source (e.g. a pipeline module)
    stage_prefix: str | None = None  # also every registered stage whose name starts with this

    def compute_key(self, task_ctx: Any, inputs: dict[str, Any], flow_parameters: dict[str, Any], **kwargs: Any) -> str | None:
        config = runtime.current().config
        parts = []
        names = list(self.stage_names) or ([inputs["stage_name"]] if "stage_name" in inputs else [])
        if self.stage_prefix:
            names += [n for n in STAGES.names() if n.startswith(self.stage_prefix)]
        for name in names:
            stage = STAGES.get(name)
            ref = config.models.ref(stage.role)
            parts += [name, str(ref), prompts.template_hash(stage.template)]
            if ref.provider == "offline":
                parts += [str(config.seed), offline_code_hash()]
        parts += [module_hash(m) for m in self.modules]
        return stable_hash("|".join(parts))


@lru_cache(maxsize=None)
def module_hash(name: str) -> str:
    import importlib
    import inspect

    return stable_hash(inspect.getsource(importlib.import_module(name)))
