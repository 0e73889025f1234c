"""The thin provider interface: translate a request to the vendor's wire format and back.

Retries, validation, concurrency, accounting and logging live once, in ``clonemem.llm.model``.
"""

from __future__ import annotations

import email.utils
import os
import time
from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import TYPE_CHECKING, ClassVar

from clonemem.llm.safety import DISABLE_ENV, is_loopback_url, live_disabled, redact
from clonemem.llm.types import (
    GenerateRequest,
    GenerateResult,
    LiveProviderDisabled,
    LLMError,
    PermanentError,
    ProviderRejected,
    TransientError,
)

if (
    TYPE_CHECKING
):  # annotations only: the config's schema reads the provider registry, which reads this
    from clonemem.schemas.config import LiveProviderSettings, RunConfig

TRANSIENT_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504, 529})


class ModelAPI(ABC):
    """One provider/model pair."""

    provider: ClassVar[str]
    is_live: ClassVar[bool] = True

    @property
    def waits(self) -> bool:
        """Whether a call spends its time waiting (network, simulated latency) rather than computing:
        only then do concurrent calls help (computing ones would just take turns on the GIL)."""
        return True

    # set by the wrapper when the provider refused this model's key or request: the steps still
    # waiting for it stop without sending (clonemem/llm/model.py); a class default, so a plugin's
    # provider that does not call this __init__ has it too
    refused: LLMError | None = None

    def __init__(self, model: str) -> None:
        self.model = model

    @property
    def ref(self) -> str:
        return f"{self.provider}/{self.model}"

    @classmethod
    @abstractmethod
    def from_config(cls, model: str, config: RunConfig) -> ModelAPI:
        """Build the provider for ``model`` from a run configuration."""

    @abstractmethod
    def generate(self, request: GenerateRequest) -> GenerateResult:
        """One attempt. Raise TransientError (worth retrying) or PermanentError."""

    def redact(self, text: str) -> str:
        return text


class LiveModelAPI(ModelAPI):
    """Shared plumbing of networked providers: key lookup, the live switch, error translation."""

    base_url_env: ClassVar[str]
    default_base_url: ClassVar[str]

    def __init__(
        self, model: str, settings: LiveProviderSettings, api_key: str | None, base_url: str
    ) -> None:
        super().__init__(model)
        self.settings = settings
        self._api_key = api_key
        self.base_url = base_url

    @classmethod
    def from_config(cls, model: str, config: RunConfig) -> LiveModelAPI:
        settings = config.providers.live(cls.provider)
        base_url = settings.base_url or os.environ.get(cls.base_url_env) or cls.default_base_url
        if live_disabled() and not is_loopback_url(base_url):
            raise LiveProviderDisabled(
                f"{cls.provider}/{model}: live LLM providers are disabled by ${DISABLE_ENV} "
                "(only loopback test servers are allowed)"
            )
        return cls(model, settings, _resolve_key(cls.provider, settings), base_url)

    def redact(self, text: str) -> str:
        return redact(text, self._api_key)

    def key_hint(self) -> str:
        if self.settings.api_key_secret:
            return f"the Prefect Secret block {self.settings.api_key_secret!r}"
        return (
            f"${self.settings.api_key_env}"
            if self.settings.api_key_env
            else "the endpoint's key setting"
        )

    def status_error(
        self, status: int, headers: Mapping[str, str] | None, message: str
    ) -> LLMError:
        """Map an HTTP error status to a transient or permanent error with a clear, key-free message."""
        message = self.redact(message)
        if status in TRANSIENT_STATUS or status >= 500:
            return TransientError(
                f"{self.ref}: HTTP {status}: {message}",
                retry_after=retry_after(headers),
                status=status,
            )
        # Any other 4xx is about the request, the key or the model, not this moment: the run stops.
        if status in (401, 403):
            reason = "authentication failed" if status == 401 else "permission denied"
            return ProviderRejected(
                f"{self.ref}: {reason} (HTTP {status}); check the API key in {self.key_hint()}",
                status=status,
            )
        what = "model not found" if status == 404 else "request rejected"
        return ProviderRejected(
            f"{self.ref}: {what} (HTTP {status}): {_short(message)} (key from {self.key_hint()})",
            status=status,
        )

    def connection_error(self, exc: Exception) -> TransientError:
        """No reply: a timeout (every SDK names its timeout errors so) or a failed connection."""
        kind = "timeout" if "timeout" in type(exc).__name__.lower() else "connection"
        return TransientError(
            f"{self.ref}: {type(exc).__name__}: {self.redact(str(exc)) or 'connection failed'}",
            kind=kind,
        )

    def timeout_for(self, request: GenerateRequest) -> float:
        """The attempt's bound (the wrapper's, else the configured ``timeout_s``), for the SDK's request."""
        return request.timeout_s if request.timeout_s is not None else self.settings.timeout_s


def _short(message: str, limit: int = 200) -> str:
    """A provider's error text on one line, bounded (the whole error is one line of output)."""
    text = " ".join(message.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def retry_after(headers: Mapping[str, str] | None) -> float | None:
    """Seconds to wait from `retry-after-ms` or `retry-after` (seconds or an HTTP date)."""
    if not headers:
        return None
    lowered = {k.lower(): v for k, v in headers.items()}
    if (ms := lowered.get("retry-after-ms")) is not None:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    value = lowered.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        parsed = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, parsed.timestamp() - time.time())


def _resolve_key(provider: str, settings: LiveProviderSettings) -> str | None:
    if settings.api_key_secret:
        from prefect.blocks.system import Secret  # only when configured: needs a Prefect API

        secret = Secret.load(settings.api_key_secret)
        assert isinstance(secret, Secret)  # called synchronously: the block itself, not a coroutine
        return secret.get()
    if not settings.api_key_env:
        return None
    key = os.environ.get(settings.api_key_env)
    if not key:
        raise PermanentError(f"{provider}: no API key in ${settings.api_key_env}")
    return key
