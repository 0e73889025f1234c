"""`gemini/<model>` through `google-genai`, Google's maintained SDK (`google-generativeai` reached
end of life on 30 Nov 2025 and pins protobuf<6)."""

from __future__ import annotations

import httpx
from google import genai
from google.genai import errors as genai_errors
from google.genai import types

from clonemem.llm.providers.base import LiveModelAPI
from clonemem.llm.types import GenerateRequest, GenerateResult
from clonemem.schemas.config import LiveProviderSettings

try:  # google-genai 3.x talks through httpx2; older releases through httpx
    import httpx2

    _TRANSPORT_ERRORS: tuple[type[Exception], ...] = (httpx.TransportError, httpx2.TransportError)
except ImportError:  # pragma: no cover
    _TRANSPORT_ERRORS = (httpx.TransportError,)


class GeminiAPI(LiveModelAPI):
    provider = "gemini"
    base_url_env = "GOOGLE_GEMINI_BASE_URL"
    default_base_url = "https://generativelanguage.googleapis.com/"

    def __init__(
        self, model: str, settings: LiveProviderSettings, api_key: str | None, base_url: str
    ) -> None:
        super().__init__(model, settings, api_key, base_url)
        # The wrapper owns retries (one budget per call): one attempt per request, said explicitly
        self.client = genai.Client(
            api_key=api_key or "none",
            http_options=types.HttpOptions(
                base_url=base_url,
                timeout=int(settings.timeout_s * 1000),
                retry_options=types.HttpRetryOptions(attempts=1),
            ),
        )

    def generate(self, request: GenerateRequest) -> GenerateResult:
        config = types.GenerateContentConfig(
            system_instruction=request.system,
            temperature=request.temperature,
            max_output_tokens=min(request.max_tokens, self.settings.max_output_tokens),
            http_options=types.HttpOptions(
                timeout=max(1, int(self.timeout_for(request) * 1000)),
                retry_options=types.HttpRetryOptions(attempts=1),
            ),
        )
        if request.output_schema is not None and self.settings.structured_output == "native":
            config.response_mime_type = "application/json"
            config.response_json_schema = request.output_schema.model_json_schema()
        contents = [
            types.Content(
                role="model" if m.role == "assistant" else "user",
                parts=[types.Part(text=m.content)],
            )
            for m in request.messages
        ]
        try:
            resp = self.client.models.generate_content(
                model=self.model, contents=contents, config=config
            )
        except genai_errors.APIError as exc:
            headers = getattr(exc.response, "headers", None)
            raise self.status_error(
                exc.code or 0, headers, exc.message or str(exc.status)
            ) from None
        except _TRANSPORT_ERRORS as exc:
            raise self.connection_error(exc) from None
        usage = resp.usage_metadata
        finish = resp.candidates[0].finish_reason if resp.candidates else None
        return GenerateResult(
            text=resp.text or "",
            input_tokens=(usage.prompt_token_count or 0) if usage else 0,
            output_tokens=(usage.candidates_token_count or 0) if usage else 0,
            finish_reason=str(finish) if finish is not None else None,
        )
