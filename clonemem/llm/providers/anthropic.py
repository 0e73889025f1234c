"""`anthropic/<model>` through the official SDK (Messages API)."""

from __future__ import annotations

import anthropic

from clonemem.llm.providers.base import LiveModelAPI
from clonemem.llm.types import GenerateRequest, GenerateResult
from clonemem.schemas.config import LiveProviderSettings


class AnthropicAPI(LiveModelAPI):
    provider = "anthropic"
    base_url_env = "ANTHROPIC_BASE_URL"
    default_base_url = "https://api.anthropic.com"

    def __init__(
        self, model: str, settings: LiveProviderSettings, api_key: str | None, base_url: str
    ) -> None:
        super().__init__(model, settings, api_key, base_url)
        # The wrapper owns retries and their accounting, so the SDK's own are off.
        self.client = anthropic.Anthropic(
            api_key=api_key or "none", base_url=base_url, max_retries=0, timeout=settings.timeout_s
        )

    def generate(self, request: GenerateRequest) -> GenerateResult:
        kwargs: dict = {
            "model": self.model,
            "max_tokens": min(request.max_tokens, self.settings.max_output_tokens),
            "system": request.system,
            "messages": [{"role": m.role, "content": m.content} for m in request.messages],
            "timeout": self.timeout_for(request),
            # Messages API 2.x takes no temperature: sampling is the model default.
        }
        if request.output_schema is not None and self.settings.structured_output == "native":
            kwargs["output_config"] = {
                "format": {
                    "type": "json_schema",
                    "schema": anthropic.transform_schema(request.output_schema),
                }
            }
        try:
            msg = self.client.messages.create(**kwargs)
        except anthropic.APIStatusError as exc:
            raise self.status_error(exc.status_code, exc.response.headers, exc.message) from None
        except (anthropic.APITimeoutError, anthropic.APIConnectionError) as exc:
            raise self.connection_error(exc) from None
        text = "".join(block.text for block in msg.content if block.type == "text")
        return GenerateResult(
            text=text,
            input_tokens=msg.usage.input_tokens,
            output_tokens=msg.usage.output_tokens,
            finish_reason=msg.stop_reason,
        )
