"""A provider plugin: CloneMem's offline world under the provider name ``example_offline``.

It shows the whole contract of a provider (a ``ModelAPI`` subclass with ``provider``, ``is_live``,
``from_config`` and ``generate``); a real plugin would translate requests to its vendor's API in
``generate`` and raise ``TransientError``/``PermanentError`` (both from ``clonemem.plugin``).
"""

from __future__ import annotations

from clonemem.plugin import OfflineAPI, RunConfig


class ExampleOfflineAPI(OfflineAPI):
    provider = "example_offline"

    @classmethod
    def from_config(cls, model: str, config: RunConfig) -> "ExampleOfflineAPI":
        return cls(model, config.providers.offline, config.seed)
