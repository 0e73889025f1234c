"""Providers by name, imported lazily: naming `gemini/...` imports google-genai, nothing else does.
Other packages add providers through the ``clonemem.providers`` entry-point group; their settings
are read from ``[providers.other.NAME]`` in the run config."""

from __future__ import annotations

from typing import TYPE_CHECKING

from clonemem.registry import Registry

if TYPE_CHECKING:
    from clonemem.llm.providers.base import ModelAPI


def _is_provider(obj: object) -> bool:
    from clonemem.llm.providers.base import (
        ModelAPI,  # on use: the config schema reads this module's names
    )

    return isinstance(obj, type) and issubclass(obj, ModelAPI)


PROVIDERS: Registry[type[ModelAPI]] = Registry(
    "LLM provider",
    entry_point_group="clonemem.providers",
    accepts=_is_provider,
    expected="a ModelAPI subclass",
)
PROVIDERS.add_lazy("offline", "clonemem.llm.providers.offline:OfflineAPI")
PROVIDERS.add_lazy(
    "anthropic", "clonemem.llm.providers.anthropic:AnthropicAPI", "pip install anthropic"
)
PROVIDERS.add_lazy("gemini", "clonemem.llm.providers.gemini:GeminiAPI", "pip install google-genai")
PROVIDERS.add_lazy("openai", "clonemem.llm.providers.openai:OpenAIAPI", "pip install openai")
