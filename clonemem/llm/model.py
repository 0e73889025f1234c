"""The wrapper every LLM call goes through (a thin provider, a heavy wrapper).

It owns: structured-output validation with the error fed back and a bounded retry; transient-error
retries with backoff that honours ``retry-after``; no retry on permanent (auth/4xx) errors; a
concurrency limit per provider; usage and cost accounting; one call record per logical call.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import random
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Protocol, TypeVar

from pydantic import BaseModel, ValidationError

from clonemem import prompts
from clonemem.llm.pricing import cost_usd, price_for
from clonemem.llm.providers.base import ModelAPI
from clonemem.llm.registry import PROVIDERS
from clonemem.llm.types import (
    BudgetExceeded,
    CallFailed,
    CallRecord,
    GenerateRequest,
    GenerateResult,
    InvalidOutputError,
    LLMError,
    Message,
    OfflineAnswer,
    PermanentError,
    ProviderRejected,
    StageNotCovered,
    TransientError,
    Usage,
    current_item,
    estimate_tokens,
    loads_lenient,
)
from clonemem.schemas.config import ModelPrice, Role, RunConfig

T = TypeVar("T", bound=BaseModel)

MAX_RETRY_AFTER_S = 600.0


class CallSink(Protocol):
    def record(self, rec: CallRecord) -> None: ...


class MemorySink:
    """Keeps call records in memory (tests, and flows that land them later)."""

    def __init__(self) -> None:
        self.records: list[CallRecord] = []
        self._lock = threading.Lock()

    def record(self, rec: CallRecord) -> None:
        with self._lock:
            self.records.append(rec)


@dataclass(frozen=True)
class RetryPolicy:
    max_retries: int
    max_validation_retries: int
    backoff_base_s: float
    backoff_max_s: float

    def delay(self, retry: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(retry_after, MAX_RETRY_AFTER_S)
        # exponential backoff with full jitter (timing only: outputs never depend on it)
        cap = min(self.backoff_max_s, self.backoff_base_s * 2 ** (retry - 1))
        return random.uniform(cap / 2, cap) if cap > 0 else 0.0


class Budget:
    """A run's spending limit, shared by every model of the run. A call goes out only if the spend so far,
    plus what calls in flight may still cost, plus this call at most (its prompt, and ``max_tokens`` of
    output, at the model's price) stays within the limit; the actual cost, priced from the tokens the
    provider reports, is then added. Unpriced models cannot be bounded and are refused."""

    def __init__(self, limit_usd: float) -> None:
        self.limit_usd = limit_usd
        self.spent_usd = 0.0
        self._reserved = 0.0
        self._lock = threading.Lock()

    def reserve(self, ref: str, price: ModelPrice | None, prompt_tokens: int, max_tokens: int) -> float:
        if price is None:
            raise BudgetExceeded(f"{ref} has no known price, so a cost budget cannot bound it: add it under "
                                 "[pricing] in the config")
        worst = cost_usd(price, prompt_tokens, max_tokens) or 0.0
        with self._lock:
            if self.spent_usd + self._reserved + worst > self.limit_usd:
                raise BudgetExceeded(
                    f"stopped before exceeding the cost budget: spent ${self.spent_usd:.4f} of "
                    f"${self.limit_usd:.4f}, and the next {ref} call could cost up to ${worst:.4f}")
            self._reserved += worst
        return worst

    def settle(self, reserved: float, actual: float | None) -> None:
        with self._lock:
            self._reserved -= reserved
            self.spent_usd += actual or 0.0


_LIMITERS: dict[str, threading.BoundedSemaphore] = {}
_LIMITERS_LOCK = threading.Lock()


def _limiter(provider: str, size: int) -> threading.BoundedSemaphore:
    """One semaphore per provider for the whole process, shared by every role that uses it."""
    with _LIMITERS_LOCK:
        if provider not in _LIMITERS:
            _LIMITERS[provider] = threading.BoundedSemaphore(size)
        return _LIMITERS[provider]


# Call ids are event ids, not content: random version-4 UUIDs from one generator seeded by the OS. Not
# uuid.uuid4() itself: its urandom syscall gives up the GIL, and under busy task threads getting it back
# cost ~0.2 ms per call (7% of a profiled offline evaluation's samples).
_CALL_IDS = random.Random(int.from_bytes(os.urandom(16), "big"))


def _call_id() -> str:
    return str(uuid.UUID(int=_CALL_IDS.getrandbits(128), version=4))


class Model:
    def __init__(
        self,
        api: ModelAPI,
        role: str,
        policy: RetryPolicy,
        limiter: threading.BoundedSemaphore,
        price: ModelPrice | None,
        sink: CallSink | None = None,
        run_id: str | None = None,
        sleep: Callable[[float], None] = time.sleep,
        budget: Budget | None = None,
        covers: Mapping[str, str] | None = None,
        store_texts: bool = False,
    ) -> None:
        self.api = api
        self.role = role
        self.policy = policy
        self.price = price
        self.sink = sink
        self.run_id = run_id
        self.usage = Usage()
        self._limiter = limiter
        self._sleep = sleep
        self.budget = budget
        self.covers = covers  # stage name -> role a cached task's key covers (None: no restriction)
        self.store_texts = store_texts  # keep each call's prompt and reply in its record ([logging] store_calls)
        self._usage_lock = threading.Lock()

    @property
    def ref(self) -> str:
        return self.api.ref

    def recording_to(self, sink: CallSink, covers: Mapping[str, str] | None = None) -> Model:
        """This model with its calls recorded to ``sink`` (same provider, limits and retry policy; its own
        usage totals): a task records the calls it makes, to return them with its result. ``covers``
        (stage name -> role) are the only stages it may then run: those its task's cache key covers."""
        return Model(self.api, self.role, self.policy, self._limiter, self.price, sink, self.run_id, self._sleep,
                     self.budget, covers, self.store_texts)

    @property
    def is_offline(self) -> bool:
        return not self.api.is_live

    # -- public ------------------------------------------------------------------------------

    def request(self, stage: str, prompt: prompts.Prompt, schema: type[BaseModel] | None = None, *,
                inputs_key: str = "", offline: OfflineAnswer | None = None, max_tokens: int = 4096) -> GenerateRequest:
        """Build a request from a rendered prompt; structured requests carry the JSON schema instruction."""
        if self.covers is not None and self.covers.get(stage) != self.role:
            why = (f"its key covers it through the {self.covers[stage]} role's model, not the {self.role} role's"
                   if stage in self.covers else
                   f"its key covers only {', '.join(sorted(self.covers)) or 'no stage'}")
            raise StageNotCovered(f"stage {stage!r} called inside a cached task that does not key on it ({why}); "
                                  "add it to the task's cache policy (or the memory system's llm_stages)")
        user = prompt.user
        if schema is not None:
            user += "\n\n" + _json_instruction(schema)
        return GenerateRequest(
            stage=stage, role=self.role, system=prompt.system, messages=(Message("user", user),),
            inputs_key=inputs_key, offline=offline, output_schema=schema, max_tokens=max_tokens,
        )

    def structured(self, request: GenerateRequest, schema: type[T]) -> T:
        """Call until the reply validates against ``schema`` (bounded), feeding the error back."""
        rec = self._record(request)
        request = replace(request, output_schema=schema)
        messages = list(request.messages)
        started = time.perf_counter()
        try:
            for _ in range(self.policy.max_validation_retries + 1):
                result = self._complete(replace(request, messages=tuple(messages)), rec)
                try:
                    return schema.model_validate(loads_lenient(result.text))
                except ValueError as exc:  # JSONDecodeError and ValidationError are ValueErrors
                    problem = _describe(exc)
                    messages += [
                        Message("assistant", result.text),
                        Message("user", prompts.render("output_feedback", problem=problem).user),
                    ]
            rec.outcome = "invalid_output"
            rec.error = f"no valid {schema.__name__} after {rec.attempts} attempts: {problem}"
            raise InvalidOutputError(f"{self.ref} ({request.stage}): {rec.error}", last_output=result.text)
        except LLMError as exc:
            self._fail(rec, exc)
            raise
        finally:
            self._finish(rec, started)

    def text(self, request: GenerateRequest) -> str:
        """Free-text call (no schema): transient retries only."""
        rec = self._record(request)
        started = time.perf_counter()
        try:
            return self._complete(request, rec).text
        except LLMError as exc:
            self._fail(rec, exc)
            raise
        finally:
            self._finish(rec, started)

    # -- internals ---------------------------------------------------------------------------

    def _complete(self, request: GenerateRequest, rec: CallRecord) -> GenerateResult:
        retries = 0
        if self.store_texts:
            rec.prompt_text = self.api.redact(_exchange(request))
        while True:
            reserved = self._reserve(request)
            rec.attempts += 1
            try:
                with self._limiter:
                    if (refused := getattr(self.api, "refused", None)) is not None:
                        rec.attempts -= 1  # not sent: the provider already refused this model's key or request
                        raise refused
                    result = self.api.generate(replace(request, attempt=rec.attempts))
            except TransientError as exc:
                self._settle(reserved, None)
                if retries >= self.policy.max_retries:
                    raise CallFailed(f"gave up after {rec.attempts} attempts: {exc}") from exc
                retries += 1
                self._sleep(self.policy.delay(retries, exc.retry_after))
                continue
            except ProviderRejected as exc:
                self._settle(reserved, None)
                exc = exc.for_role(self.role)
                self.api.refused = exc  # the steps still waiting for this model stop without sending
                raise exc from None
            except BaseException:
                self._settle(reserved, None)
                raise
            rec.input_tokens += result.input_tokens
            rec.output_tokens += result.output_tokens
            if self.store_texts:
                rec.response_text = self.api.redact(result.text)
            self._settle(reserved, cost_usd(self.price, result.input_tokens, result.output_tokens))
            return result

    def _reserve(self, request: GenerateRequest) -> float:
        if self.budget is None:
            return 0.0
        prompt = request.system + "".join(m.content for m in request.messages)
        return self.budget.reserve(self.ref, self.price, estimate_tokens(prompt), request.max_tokens)

    def _settle(self, reserved: float, actual: float | None) -> None:
        if self.budget is not None:
            self.budget.settle(reserved, actual)

    def _record(self, request: GenerateRequest) -> CallRecord:
        return CallRecord(
            call_id=_call_id(), run_id=self.run_id, stage=request.stage, role=self.role,
            provider=self.api.provider, model=self.api.model, is_offline=self.is_offline,
            prompt_hash=request.prompt_hash, started_at=dt.datetime.now(dt.UTC).replace(tzinfo=None),
            item=current_item(),
        )

    def _fail(self, rec: CallRecord, exc: LLMError) -> None:
        if isinstance(exc, InvalidOutputError):
            return  # outcome already set
        rec.outcome = "permanent_error" if isinstance(exc, PermanentError) else "transient_error"
        rec.error = self.api.redact(str(exc))

    def _finish(self, rec: CallRecord, started: float) -> None:
        rec.latency_ms = (time.perf_counter() - started) * 1000.0
        rec.cost_usd = cost_usd(self.price, rec.input_tokens, rec.output_tokens)
        if rec.error:
            rec.error = self.api.redact(rec.error)
        if rec.attempts == 0:
            return  # never sent (refused by the budget before the first attempt): not a call
        with self._usage_lock:
            self.usage.add(rec)
        if self.sink is not None:
            self.sink.record(rec)


def _exchange(request: GenerateRequest) -> str:
    """What the model is sent, as JSON: the system prompt, then the conversation (validation feedback too)."""
    turns = [{"role": "system", "content": request.system}, *({"role": m.role, "content": m.content}
                                                               for m in request.messages)]
    return json.dumps(turns, ensure_ascii=False)


@lru_cache(maxsize=None)
def _json_instruction(schema: type[BaseModel]) -> str:
    """The instruction to reply with JSON of ``schema`` (rendered once per schema: it is on every call)."""
    return prompts.render("json_output", schema=json.dumps(schema.model_json_schema())).user


def _describe(exc: ValueError) -> str:
    if isinstance(exc, ValidationError):
        parts = []
        for err in exc.errors(include_url=False)[:8]:
            where = ".".join(str(p) for p in err["loc"]) or "(root)"
            parts.append(f"{where}: {err['msg']}")
        return "the JSON does not match the schema: " + "; ".join(parts)
    return f"the reply is not valid JSON ({exc})"


def get_model(config: RunConfig, role: Role, sink: CallSink | None = None, run_id: str | None = None,
              sleep: Callable[[float], None] = time.sleep, budget: Budget | None = None) -> Model:
    """The model bound to ``role`` by the config, wrapped. Raises for a disabled live provider."""
    ref = config.models.ref(role)
    api_cls = PROVIDERS.get(ref.provider)
    api = api_cls.from_config(ref.model, config)
    settings = config.role_settings(role)
    policy = RetryPolicy(
        max_retries=settings.max_retries,
        max_validation_retries=settings.max_validation_retries,
        backoff_base_s=settings.backoff_base_s,
        backoff_max_s=settings.backoff_max_s,
    )
    return Model(api, role, policy, _limiter(ref.provider, settings.max_concurrency),
                 price_for(str(ref), config), sink, run_id, sleep, budget,
                 store_texts=config.logging.stores(api.is_live))


__all__ = ["CallFailed", "CallSink", "MemorySink", "Model", "RetryPolicy", "get_model", "TransientError"]
