"""`openai/<model>`: any OpenAI-compatible Chat Completions endpoint (OpenAI, vLLM, Ollama, LM Studio)."""

from __future__ import annotations

import openai

from clonemem.llm.providers.base import LiveModelAPI
from clonemem.llm.types import GenerateRequest, GenerateResult, PermanentError
from clonemem.schemas.config import LiveProviderSettings


class OpenAIAPI(LiveModelAPI):
    provider = "openai"
    base_url_env = "OPENAI_BASE_URL"
    default_base_url = "https://api.openai.com/v1"

    def __init__(
        self, model: str, settings: LiveProviderSettings, api_key: str | None, base_url: str
    ) -> None:
        super().__init__(model, settings, api_key, base_url)
        # Local servers need no key, but the SDK insists on a non-empty one. The wrapper owns retries (one
        # budget per call), so the SDK's own are off.
        self.client = openai.OpenAI(
            api_key=api_key or "not-needed",
            base_url=base_url,
            max_retries=0,
            timeout=settings.timeout_s,
        )

    def generate(self, request: GenerateRequest) -> GenerateResult:
        messages = [{"role": "system", "content": request.system}]
        messages += [{"role": m.role, "content": m.content} for m in request.messages]
        kwargs: dict = {
            "model": self.model,
            "messages": messages,
            "max_tokens": min(request.max_tokens, self.settings.max_output_tokens),
            "temperature": request.temperature,
            "timeout": self.timeout_for(request),
        }
        if request.output_schema is not None and self.settings.structured_output == "native":
            kwargs["response_format"] = {
                "type": "json_schema",
                "json_schema": {
                    "name": request.output_schema.__name__,
                    "schema": request.output_schema.model_json_schema(),
                    "strict": False,  # strict mode forbids optional fields; the wrapper validates instead
                },
            }
        try:
            resp = self.client.chat.completions.create(**kwargs)
        except openai.APIStatusError as exc:
            raise self.status_error(exc.status_code, exc.response.headers, exc.message) from None
        except (openai.APITimeoutError, openai.APIConnectionError) as exc:
            raise self.connection_error(exc) from None
        if not resp.choices:
            raise PermanentError(f"{self.ref}: reply has no choices")
        choice = resp.choices[0]
        usage = resp.usage
        return GenerateResult(
            text=choice.message.content or "",
            input_tokens=usage.prompt_tokens if usage else 0,
            output_tokens=usage.completion_tokens if usage else 0,
            finish_reason=choice.finish_reason,
        )
