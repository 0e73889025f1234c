"""The wrapper every LLM call goes through (a thin provider, a heavy wrapper).

It owns: structured-output validation with the error fed back and a bounded retry; transient-error
retries with backoff that honours ``retry-after``; no retry on permanent (auth/4xx) errors; a
concurrency limit per provider; usage and cost accounting; one call record per logical call, with
every attempt in it.

One retry budget per call, kept here alone (the SDKs' own retries are off, and neither a step nor a
task tries a failed call again): at most ``1 + max_retries + max_validation_retries`` attempts, each
bounded by ``timeout_s`` (a live provider's attempt is abandoned when it overruns, whatever its SDK
does), all within ``call_deadline_s`` from the first attempt. A call that ends its budget without a
single reply, while no other call of the run got one, means the provider stopped answering: the run
stops (:class:`ProviderUnresponsive`) instead of spending a deadline on every item.
"""

from __future__ import annotations

import contextvars
import datetime as dt
import json
import math
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
    NO_REPLY,
    Attempt,
    BudgetExceeded,
    CallFailed,
    CallRecord,
    GenerateRequest,
    GenerateResult,
    InvalidOutputError,
    LLMError,
    Message,
    OfflineAnswer,
    Outcome,
    PermanentError,
    ProviderRejected,
    ProviderUnresponsive,
    StageNotCovered,
    TransientError,
    Usage,
    current_item,
    estimate_tokens,
    loads_lenient,
)
from clonemem.schemas.config import LiveProviderSettings, ModelPrice, Role, RunConfig

T = TypeVar("T", bound=BaseModel)

MAX_RETRY_AFTER_S = 600.0
ATTEMPT_POLL_S = 0.25  # how often a waiting attempt looks whether the run gave up on its provider


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
    max_retries: (
        int  # attempts after a transient error (timeout, no connection, 429, 5xx), per call
    )
    max_validation_retries: int  # attempts after a reply that did not validate, per call
    backoff_base_s: float
    backoff_max_s: float
    attempt_timeout_s: float | None = None  # each attempt's bound (a live provider's timeout_s)
    call_deadline_s: float | None = None  # the call's bound from its first attempt, waits included

    @property
    def max_attempts(self) -> int:
        return 1 + self.max_retries + self.max_validation_retries

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

    def reserve(
        self, ref: str, price: ModelPrice | None, prompt_tokens: int, max_tokens: int
    ) -> float:
        if price is None:
            raise BudgetExceeded(
                f"{ref} has no known price, so a cost budget cannot bound it: add it under "
                "[pricing] in the config"
            )
        worst = cost_usd(price, prompt_tokens, max_tokens) or 0.0
        with self._lock:
            if self.spent_usd + self._reserved + worst > self.limit_usd:
                raise BudgetExceeded(
                    f"stopped before exceeding the cost budget: spent ${self.spent_usd:.4f} of "
                    f"${self.limit_usd:.4f}, and the next {ref} call could cost up to ${worst:.4f}"
                )
            self._reserved += worst
        return worst

    def settle(self, reserved: float, actual: float | None) -> None:
        with self._lock:
            self._reserved -= reserved
            self.spent_usd += actual or 0.0


class ProviderHealth:
    """What one run's calls to a provider have seen (shared by the run's models of that provider): when
    one last got a reply (an error status is a reply too), and the error the run gave up on the
    provider with, after which its calls stop without sending."""

    def __init__(self) -> None:
        self.last_reply = -math.inf
        self.gave_up: LLMError | None = None

    def replied(self) -> None:
        self.last_reply = time.monotonic()


class _CallBudget:
    """One call's budget as it is spent: its attempts (each logged), its transient retries and its clock,
    which starts with the first attempt (time queued behind the provider's concurrency limit is not the
    provider's)."""

    def __init__(self, policy: RetryPolicy) -> None:
        self.policy = policy
        self.attempts: list[Attempt] = []
        self.retries = 0
        self.replied = False  # some attempt got a reply
        self.first_sent: float | None = None

    def elapsed(self) -> float:
        return 0.0 if self.first_sent is None else time.monotonic() - self.first_sent

    def left(self) -> float | None:
        """Seconds left before the deadline (None: no deadline)."""
        if self.policy.call_deadline_s is None:
            return None
        return self.policy.call_deadline_s - self.elapsed()

    def attempt_bound(self) -> float | None:
        """The next attempt's bound: the attempt timeout, or less when the deadline is nearer."""
        bounds = [b for b in (self.policy.attempt_timeout_s, self.left()) if b is not None]
        return max(0.01, min(bounds)) if bounds else None

    def sending(self) -> tuple[dt.datetime, float]:
        now = time.monotonic()
        if self.first_sent is None:
            self.first_sent = now
        return dt.datetime.now(dt.UTC).replace(tzinfo=None), now

    def log(
        self,
        n: int,
        started: tuple[dt.datetime, float],
        outcome: Outcome,
        exc: BaseException | None = None,
        redact: Callable[[str], str] = str,
    ) -> None:
        error_class = getattr(exc, "error_class", type(exc).__name__) if exc is not None else None
        self.attempts.append(
            Attempt(
                n,
                started[0],
                (time.monotonic() - started[1]) * 1000.0,
                outcome,
                error_class,
                None if exc is None else redact(str(exc))[:500],
            )
        )

    def invalid(self, problem: str) -> None:
        """The last attempt's reply did not validate."""
        last = self.attempts[-1]
        self.attempts[-1] = replace(
            last, outcome="invalid_output", error_class="invalid_output", error=problem[:500]
        )

    def stop_reason(self, wait_s: float) -> str | None:
        """Why no further attempt is made after a transient error (None: one is), given the wait before it."""
        if self.retries >= self.policy.max_retries:
            return f"max_retries = {self.policy.max_retries}"
        left = self.left()
        if left is not None and wait_s >= left:
            return f"call deadline {self.policy.call_deadline_s:g} s"
        return None

    def deadline_passed(self) -> bool:
        left = self.left()
        return left is not None and left <= 0


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
        health: ProviderHealth | None = None,
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
        self.store_texts = (
            store_texts  # keep each call's prompt and reply in its record ([logging] store_calls)
        )
        self.health = health or ProviderHealth()  # shared by the run's models of this provider
        self._usage_lock = threading.Lock()

    @property
    def ref(self) -> str:
        return self.api.ref

    def recording_to(self, sink: CallSink, covers: Mapping[str, str] | None = None) -> Model:
        """This model with its calls recorded to ``sink`` (same provider, limits and retry policy; its own
        usage totals): a task records the calls it makes, to return them with its result. ``covers``
        (stage name -> role) are the only stages it may then run: those its task's cache key covers."""
        return Model(
            self.api,
            self.role,
            self.policy,
            self._limiter,
            self.price,
            sink,
            self.run_id,
            self._sleep,
            self.budget,
            covers,
            self.store_texts,
            self.health,
        )

    @property
    def is_offline(self) -> bool:
        return not self.api.is_live

    # -- public ------------------------------------------------------------------------------

    def request(
        self,
        stage: str,
        prompt: prompts.Prompt,
        schema: type[BaseModel] | None = None,
        *,
        inputs_key: str = "",
        offline: OfflineAnswer | None = None,
        max_tokens: int = 4096,
    ) -> GenerateRequest:
        """Build a request from a rendered prompt; structured requests carry the JSON schema instruction."""
        if self.covers is not None and self.covers.get(stage) != self.role:
            why = (
                f"its key covers it through the {self.covers[stage]} role's model, not the {self.role} role's"
                if stage in self.covers
                else f"its key covers only {', '.join(sorted(self.covers)) or 'no stage'}"
            )
            raise StageNotCovered(
                f"stage {stage!r} called inside a cached task that does not key on it ({why}); "
                "add it to the task's cache policy (or the memory system's llm_stages)"
            )
        user = prompt.user
        if schema is not None:
            user += "\n\n" + _json_instruction(schema)
        return GenerateRequest(
            stage=stage,
            role=self.role,
            system=prompt.system,
            messages=(Message("user", user),),
            inputs_key=inputs_key,
            offline=offline,
            output_schema=schema,
            max_tokens=max_tokens,
        )

    def structured(self, request: GenerateRequest, schema: type[T]) -> T:
        """Call until the reply validates against ``schema`` (bounded), feeding the error back."""
        rec, call = self._record(request), _CallBudget(self.policy)
        request = replace(request, output_schema=schema)
        messages = list(request.messages)
        try:
            for round_ in range(self.policy.max_validation_retries + 1):
                if round_ and call.deadline_passed():
                    break
                result = self._complete(replace(request, messages=tuple(messages)), rec, call)
                try:
                    return schema.model_validate(loads_lenient(result.text))
                except ValueError as exc:  # JSONDecodeError and ValidationError are ValueErrors
                    problem = _describe(exc)
                    call.invalid(problem)
                    messages += [
                        Message("assistant", result.text),
                        Message("user", prompts.render("output_feedback", problem=problem).user),
                    ]
            rec.outcome = "invalid_output"
            rec.error = (
                f"no valid {schema.__name__} after {rec.attempts} attempts in {call.elapsed():.1f} s"
                f"{' (call deadline)' if call.deadline_passed() else ''}: {problem}"
            )
            raise InvalidOutputError(
                f"{self.ref} ({request.stage}): {rec.error}", last_output=result.text
            )
        except LLMError as exc:
            self._fail(rec, exc)
            raise
        finally:
            self._finish(rec, call)

    def text(self, request: GenerateRequest) -> str:
        """Free-text call (no schema): transient retries only."""
        rec, call = self._record(request), _CallBudget(self.policy)
        try:
            return self._complete(request, rec, call).text
        except LLMError as exc:
            self._fail(rec, exc)
            raise
        finally:
            self._finish(rec, call)

    # -- internals ---------------------------------------------------------------------------

    def _refused(self) -> LLMError | None:
        """Why this model's calls stop without sending: its key or request was refused, or the run gave up
        on the provider (it stopped answering)."""
        refused = self.api.refused
        return refused if refused is not None else self.health.gave_up

    def _complete(
        self, request: GenerateRequest, rec: CallRecord, call: _CallBudget
    ) -> GenerateResult:
        if self.store_texts:
            rec.prompt_text = self.api.redact(_exchange(request))
        while True:
            reserved = self._reserve(request)
            rec.attempts += 1
            started: tuple[dt.datetime, float] | None = None
            try:
                with self._limiter:
                    if (refused := self._refused()) is not None:
                        rec.attempts -= (
                            1  # not sent: the provider already refused this model's key or request
                        )
                        raise refused
                    bound = call.attempt_bound()
                    started = call.sending()
                    result = self._attempt(
                        replace(request, attempt=rec.attempts, timeout_s=bound), bound
                    )
            except BaseException as exc:
                self._settle(reserved, None)
                self._sleep(
                    self._retry_wait(exc, rec, call, started)
                )  # or raises: no further attempt
                continue
            assert started is not None  # the attempt was sent
            call.replied = True
            self.health.replied()
            call.log(rec.attempts, started, "ok")
            rec.input_tokens += result.input_tokens
            rec.output_tokens += result.output_tokens
            if self.store_texts:
                rec.response_text = self.api.redact(result.text)
            self._settle(reserved, cost_usd(self.price, result.input_tokens, result.output_tokens))
            return result

    def _retry_wait(
        self,
        exc: BaseException,
        rec: CallRecord,
        call: _CallBudget,
        started: tuple[dt.datetime, float] | None,
    ) -> float:
        """After a failed attempt (``started``: None when it was not sent), the wait before the next one;
        raises when there is none: a permanent error, or a transient one with the budget spent."""
        if started is not None and isinstance(exc, LLMError):
            # abandoned (the run gave up on the provider meanwhile) or no reply: no sign of the provider
            silent = isinstance(exc, ProviderUnresponsive) or (
                isinstance(exc, TransientError) and exc.error_class in NO_REPLY
            )
            outcome: Outcome = (
                "transient_error"
                if silent or isinstance(exc, TransientError)
                else "permanent_error"
            )
            call.log(rec.attempts, started, outcome, exc, self.api.redact)
            if not silent:
                call.replied = True  # a refusal or an error status is a reply
                self.health.replied()
        if isinstance(exc, ProviderRejected):
            exc = exc.for_role(self.role)
            if not isinstance(exc, ProviderUnresponsive):
                self.api.refused = (
                    exc  # the steps still waiting for this model stop without sending
                )
            raise exc from None
        if not isinstance(exc, TransientError):
            raise exc
        wait = self.policy.delay(call.retries + 1, exc.retry_after)
        if (why := call.stop_reason(wait)) is not None:
            raise self._gave_up(rec, call, exc, why) from exc
        call.retries += 1
        return wait

    def _attempt(self, request: GenerateRequest, bound: float | None) -> GenerateResult:
        """One attempt, bounded: a live provider's runs on a thread of its own, abandoned (its SDK ends it
        at its own timeout) when it overruns ``bound`` or the run gives up on the provider meanwhile."""
        if bound is None or not self.api.is_live:
            return self.api.generate(request)
        done = threading.Event()
        outcome: list[GenerateResult | BaseException] = []

        def attempt() -> None:
            try:
                outcome.append(self.api.generate(request))
            except BaseException as exc:  # handed to the waiting thread
                outcome.append(exc)
            finally:
                done.set()

        threading.Thread(
            target=contextvars.copy_context().run,
            args=(attempt,),
            daemon=True,
            name="clonemem-llm-attempt",
        ).start()
        end = time.monotonic() + bound
        while not done.wait(min(ATTEMPT_POLL_S, max(0.0, end - time.monotonic()))):
            if (refused := self._refused()) is not None:
                raise refused
            if time.monotonic() >= end:
                raise TransientError(f"{self.ref}: no reply within {bound:g} s", kind="timeout")
        got = outcome[0]
        if isinstance(got, BaseException):
            raise got
        return got

    def _gave_up(
        self, rec: CallRecord, call: _CallBudget, exc: TransientError, why: str
    ) -> LLMError:
        """The error a call ends with when its budget is spent: :class:`ProviderUnresponsive` when no attempt
        got a reply and no other call of the run got one since this one began, else :class:`CallFailed`."""
        told = f"gave up after {rec.attempts} attempt{'s' if rec.attempts != 1 else ''} in {call.elapsed():.1f} s ({why})"
        first = call.first_sent if call.first_sent is not None else time.monotonic()
        if not call.replied and self.health.last_reply < first and self.api.is_live:
            unresponsive = ProviderUnresponsive(
                f"{self.role} {self.ref} is not answering: {told}, and no other call got a reply meanwhile; the "
                f"run stops (finished work is kept): {exc}",
                role=self.role,
            )
            self.health.gave_up = unresponsive
            return unresponsive
        return CallFailed(f"{told}: {exc}", error_class=exc.error_class)

    def _reserve(self, request: GenerateRequest) -> float:
        if self.budget is None:
            return 0.0
        prompt = request.system + "".join(m.content for m in request.messages)
        return self.budget.reserve(
            self.ref, self.price, estimate_tokens(prompt), request.max_tokens
        )

    def _settle(self, reserved: float, actual: float | None) -> None:
        if self.budget is not None:
            self.budget.settle(reserved, actual)

    def _record(self, request: GenerateRequest) -> CallRecord:
        return CallRecord(
            call_id=_call_id(),
            run_id=self.run_id,
            stage=request.stage,
            role=self.role,
            provider=self.api.provider,
            model=self.api.model,
            is_offline=self.is_offline,
            prompt_hash=request.prompt_hash,
            started_at=dt.datetime.now(dt.UTC).replace(tzinfo=None),
            item=current_item(),
        )

    def _fail(self, rec: CallRecord, exc: LLMError) -> None:
        rec.error_class = exc.error_class
        if isinstance(exc, InvalidOutputError):
            return  # outcome already set
        rec.outcome = "permanent_error" if isinstance(exc, PermanentError) else "transient_error"
        rec.error = self.api.redact(str(exc))

    def _finish(self, rec: CallRecord, call: _CallBudget) -> None:
        rec.latency_ms = call.elapsed() * 1000.0
        rec.log_attempts(call.attempts)
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
    turns = [
        {"role": "system", "content": request.system},
        *({"role": m.role, "content": m.content} for m in request.messages),
    ]
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


def get_model(
    config: RunConfig,
    role: Role,
    sink: CallSink | None = None,
    run_id: str | None = None,
    sleep: Callable[[float], None] = time.sleep,
    budget: Budget | None = None,
    health: ProviderHealth | None = None,
) -> Model:
    """The model bound to ``role`` by the config, wrapped. Raises for a disabled live provider. ``health``
    is shared by a run's models of one provider (see :class:`ProviderHealth`)."""
    ref = config.models.ref(role)
    api_cls = PROVIDERS.get(ref.provider)
    api = api_cls.from_config(ref.model, config)
    settings = config.role_settings(role)
    policy = RetryPolicy(
        max_retries=settings.max_retries,
        max_validation_retries=settings.max_validation_retries,
        backoff_base_s=settings.backoff_base_s,
        backoff_max_s=settings.backoff_max_s,
        attempt_timeout_s=settings.timeout_s
        if isinstance(settings, LiveProviderSettings)
        else None,
        call_deadline_s=settings.deadline_s if isinstance(settings, LiveProviderSettings) else None,
    )
    return Model(
        api,
        role,
        policy,
        _limiter(ref.provider, settings.max_concurrency),
        price_for(str(ref), config),
        sink,
        run_id,
        sleep,
        budget,
        store_texts=config.logging.stores(api.is_live),
        health=health,
    )


__all__ = [
    "CallFailed",
    "CallSink",
    "MemorySink",
    "Model",
    "ProviderHealth",
    "RetryPolicy",
    "get_model",
    "TransientError",
]
