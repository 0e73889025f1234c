"""`offline/<name>`: the embedded default provider. It answers through the offline handler the request's
stage declared, deterministically from the run seed and the stage's structured inputs, and
can simulate latency, transient failures and malformed output for testing the pipeline itself.

Faults are drawn from (seed, request, attempt), and the answer from (seed, stage, inputs) only, so a
run with faults ends with exactly the output of a fault-free run once the wrapper's retries succeed.
"""

from __future__ import annotations

import random
import time

from pydantic import BaseModel

from clonemem.ids import stable_int
from clonemem.llm.providers.base import ModelAPI
from clonemem.llm.types import (
    GenerateRequest,
    GenerateResult,
    PermanentError,
    TransientError,
    estimate_tokens,
)
from clonemem.schemas.config import OfflineSettings, RunConfig


class OfflineAPI(ModelAPI):
    provider = "offline"
    is_live = False

    def __init__(self, model: str, settings: OfflineSettings, seed: int) -> None:
        super().__init__(model)
        self.settings = settings
        self.seed = seed

    @property
    def waits(self) -> bool:
        return self.settings.latency_ms > 0

    @classmethod
    def from_config(cls, model: str, config: RunConfig) -> OfflineAPI:
        return cls(model, config.providers.offline, config.seed)

    def generate(self, request: GenerateRequest) -> GenerateResult:
        if request.offline is None:
            raise PermanentError(f"{self.ref}: stage {request.stage!r} declares no offline handler")
        faults = random.Random(
            stable_int(self.seed, "faults", request.inputs_hash, request.attempt)
        )
        if self.settings.latency_ms:
            time.sleep(self.settings.latency_ms / 1000.0)
        if faults.random() < self.settings.transient_failure_rate:
            raise TransientError(
                f"{self.ref}: simulated transient failure (attempt {request.attempt})", status=503
            )
        output = request.offline(
            random.Random(stable_int(self.seed, request.stage, request.inputs_hash)), self.model
        )
        text = output.model_dump_json() if isinstance(output, BaseModel) else str(output)
        if faults.random() < self.settings.malformed_rate:
            text = _malform(text, faults)
        prompt = request.system + "".join(m.content for m in request.messages)
        return GenerateResult(
            text=text,
            input_tokens=estimate_tokens(prompt),
            output_tokens=estimate_tokens(text),
            finish_reason="stop",
        )


def _malform(text: str, rng: random.Random) -> str:
    """Corrupt a reply the way real models do: truncated JSON, or prose around a broken object."""
    if rng.random() < 0.5 or len(text) < 4:
        return text[: max(1, len(text) // 2)]
    return "Sure! Here is the JSON you asked for:\n" + text.replace('"', "'", 2)
