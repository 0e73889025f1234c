"""Typed records that cross the LLM layer's boundary."""

from __future__ import annotations

import datetime as dt
import json
import random
import re
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field, fields
from typing import Generic, Literal, TypeVar

from pydantic import BaseModel

from clonemem.errors import ExitCode, UserError
from clonemem.ids import stable_hash

Outcome = Literal["ok", "invalid_output", "transient_error", "permanent_error"]


@dataclass(frozen=True)
class Message:
    role: Literal["user", "assistant"]
    content: str


# How the offline provider answers a request: the stage's declared handler, bound to the stage's typed
# inputs; called with a generator seeded by (seed, stage, inputs) and the model name.
OfflineAnswer = Callable[[random.Random, str], BaseModel | str]


@dataclass(frozen=True)
class GenerateRequest:
    """One logical LLM call.

    Live providers see the prompt; the offline provider calls ``offline`` (set by the stage that
    built the request). ``inputs_key`` identifies the stage's structured inputs (stable across
    retries and prompt wording), for seeding.
    """

    stage: str
    role: str
    system: str
    messages: tuple[Message, ...]
    inputs_key: str = ""
    offline: OfflineAnswer | None = field(default=None, compare=False, repr=False)
    output_schema: type[BaseModel] | None = None
    max_tokens: int = 4096
    temperature: float = 0.0
    attempt: int = 1  # set by the wrapper: 1 for the first try
    # set by the wrapper: this attempt's bound in seconds (the provider's timeout_s, less when the call's
    # deadline is nearer); a live provider passes it to its SDK for the request
    timeout_s: float | None = None

    @property
    def prompt_hash(self) -> str:
        """Hash of what a live model sees (system + first user message), stable across retries."""
        first = self.messages[0].content if self.messages else ""
        return stable_hash(self.system + "\x00" + first)

    @property
    def inputs_hash(self) -> str:
        return self.inputs_key or stable_hash(self.prompt_hash)

    def json_schema(self) -> dict | None:
        return self.output_schema.model_json_schema() if self.output_schema else None


@dataclass(frozen=True)
class GenerateResult:
    text: str
    input_tokens: int
    output_tokens: int
    finish_reason: str | None = None


class _Packed:
    """A text attribute held zlib-compressed (a dataclass field's descriptor: ``None`` is its default).

    An evaluation holds every call's record until it lands, and the stored prompts were its biggest
    part: 34 MB of them at the first evaluation of ``benchmarks/evaluate_scale.py``, 16 MB packed. A
    record pickled before texts were packed (a result in Prefect's cache) holds them plain: read as such."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name, self.slot = name, f"_{name}_z"

    def __get__(self, obj: object, owner: type | None = None) -> str | None:
        if obj is None:
            return None
        packed = obj.__dict__.get(self.slot)
        if packed is None:
            return obj.__dict__.get(self.name)
        return zlib.decompress(packed).decode("utf-8")

    def __set__(self, obj: object, text: str | None) -> None:
        obj.__dict__.pop(self.name, None)
        obj.__dict__[self.slot] = None if text is None else zlib.compress(text.encode("utf-8"), 1)


@dataclass(frozen=True)
class Attempt:
    """One attempt of a call, as its record keeps it (``CallRecord.attempt_log``): its number, when it
    started, how long it took, what came of it and, when it failed, the error's class and line."""

    n: int
    started_at: dt.datetime
    latency_ms: float
    outcome: Outcome
    error_class: str | None = None
    error: str | None = None

    def row(self) -> dict[str, object]:
        return {
            "n": self.n,
            "started_at": self.started_at.isoformat(sep=" "),
            "latency_ms": round(self.latency_ms, 3),
            "outcome": self.outcome,
            "error_class": self.error_class,
            "error": self.error,
        }


@dataclass
class CallRecord:
    """What is logged to the warehouse for every logical call. Never holds a key."""

    call_id: str
    run_id: str | None
    stage: str
    role: str
    provider: str
    model: str
    is_offline: bool
    prompt_hash: str
    started_at: dt.datetime
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = 0.0
    latency_ms: float = 0.0
    attempts: int = 0
    outcome: Outcome = "ok"
    error: str | None = None
    item: str | None = (
        None  # what the call was about, a JSON object (see `about`); None where no step said
    )
    error_class: str | None = (
        None  # the class of the error the call ended with (LLMError.error_class)
    )
    attempt_log: str | None = (
        None  # every attempt, failed ones included: a JSON list of Attempt.row()
    )
    # the exchange, when the config's [logging] store_calls keeps it: the last attempt's messages as a JSON
    # list of {"role", "content"} (system first) and the model's last reply; never a key or a header
    prompt_text: _Packed = _Packed()  # read and set as str | None
    response_text: _Packed = _Packed()
    # the warehouse of the run that made the call (not a column): a result served from Prefect's cache
    # carries its calls, and they are spend only of the warehouse they were made for
    warehouse: str | None = field(default=None, compare=False)

    def row(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "warehouse"}

    def log_attempts(self, attempts: list[Attempt]) -> None:
        self.attempt_log = (
            json.dumps([a.row() for a in attempts], ensure_ascii=False) if attempts else None
        )

    def attempt_list(self) -> list[Attempt]:
        """The attempts :meth:`log_attempts` kept, typed again."""
        rows = json.loads(self.attempt_log) if self.attempt_log else []
        return [
            Attempt(**{**r, "started_at": dt.datetime.fromisoformat(r["started_at"])}) for r in rows
        ]


# What the calls made in this context are about: set around a step that works on one item (evaluation: a
# question, for a system at k), read when a call's record is built. A context variable, so each worker
# thread of a batch has its own.
_CALL_ITEM: ContextVar[str | None] = ContextVar("clonemem_call_item", default=None)


@contextmanager
def about(**labels: object) -> Iterator[None]:
    """Label the LLM calls made inside (``about(question_id=..., system=..., k=...)``): the labels land as
    the calls' ``item`` (a JSON object), so a question's calls can be found in the warehouse."""
    token = _CALL_ITEM.set(json.dumps(labels, sort_keys=True, default=str))
    try:
        yield
    finally:
        _CALL_ITEM.reset(token)


def current_item() -> str | None:
    return _CALL_ITEM.get()


T = TypeVar("T")


@dataclass(frozen=True)
class Paid(Generic[T]):
    """A step's result with the LLM calls that produced it. Both are cached together, so the calls
    land with the content they paid for, also when a resumed run takes the result from the cache."""

    value: T
    calls: tuple[CallRecord, ...] = ()

    def from_cache(self, run_id: str | None) -> bool:
        """Made by an earlier run (Prefect served the result from its cache): none of its calls are this run's."""
        return bool(self.calls) and all(c.run_id != run_id for c in self.calls)


@dataclass
class Usage:
    """Running totals for one model in this process."""

    calls: int = 0
    attempts: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    failures: int = 0
    by_outcome: dict[str, int] = field(default_factory=dict)

    def add(self, rec: CallRecord) -> None:
        self.calls += 1
        self.attempts += rec.attempts
        self.input_tokens += rec.input_tokens
        self.output_tokens += rec.output_tokens
        self.cost_usd += rec.cost_usd or 0.0
        self.failures += rec.outcome != "ok"
        self.by_outcome[rec.outcome] = self.by_outcome.get(rec.outcome, 0) + 1


# -- errors ------------------------------------------------------------------------------------


class StageNotCovered(RuntimeError):
    """A call, inside a cached task, to a stage its cache key does not cover (or through a model of
    another role than the one keyed): its result would be served later for a model or template it
    was never made with. A programming error, so neither retried nor recorded as an unscored answer."""


class LLMError(RuntimeError, UserError):
    """Base of every error the LLM layer raises; messages never contain API keys. ``error_class`` is what
    a call's record says it ended with (a short word: ``timeout``, ``rate_limited``, ``rejected``...)."""

    error_class: str = "error"


class TransientError(LLMError):
    """Worth retrying: 429, 5xx, timeouts, connection resets. ``kind`` says which (the attempt's
    ``error_class``): ``timeout`` or ``connection`` (no reply: see :data:`NO_REPLY`), else from the status."""

    def __init__(
        self,
        message: str,
        retry_after: float | None = None,
        status: int | None = None,
        kind: str | None = None,
    ):
        super().__init__(message)
        self.retry_after = retry_after
        self.status = status
        self.error_class = kind or _status_class(status)

    def __reduce__(
        self,
    ) -> tuple:  # pickled with its kind (Prefect may pickle a failed task's exception)
        return (TransientError, (str(self), self.retry_after, self.status, self.error_class))


# the error classes of an attempt that got no reply at all (the provider is not answering)
NO_REPLY = frozenset({"timeout", "connection"})


def _status_class(status: int | None) -> str:
    if status is None:
        return "transient"
    if status == 429:
        return "rate_limited"
    return "server_error" if status >= 500 else f"http_{status}"


class PermanentError(LLMError):
    """Not worth retrying: authentication, permission, bad request, unknown model."""

    error_class = "permanent"

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.status = status


class ProviderRejected(PermanentError):
    """The provider refused the request itself (a rejected key, no permission, an unknown model, a
    malformed request): every further call of the role would fail alike, so the run stops at once
    instead of recording each item as failed."""

    error_class = "rejected"

    def __init__(self, message: str, status: int | None = None, role: str | None = None):
        super().__init__(message, status=status)
        self.role = role

    def for_role(self, role: str) -> ProviderRejected:
        """The same error, its message led by the role whose model refused (the wrapper knows it)."""
        if self.role is not None:
            return self
        return type(self)(f"{role} {self}", status=self.status, role=role)

    def __reduce__(self) -> tuple:  # Prefect may pickle a failed task's exception
        return (type(self), (str(self), self.status, self.role))


class ProviderUnresponsive(ProviderRejected):
    """A call spent its whole retry budget without a reply (every attempt timed out or could not
    connect) and no other call of the run got one meanwhile: the provider stopped answering. Like a
    rejected key it stops the run (the calls waiting for the provider stop without sending), so a run
    whose provider is down ends within one call's deadline instead of spending it on every item."""

    error_class = "unresponsive"


class BudgetExceeded(PermanentError):
    """The next call could take the run's spend over its budget (``--max-cost``); nothing was sent."""

    error_class = "budget"

    exit_code = ExitCode.BUDGET


class LiveProviderDisabled(LLMError):
    """A live provider was asked for while CLONEMEM_DISABLE_LIVE_LLM is set."""

    error_class = "disabled"


class InvalidOutputError(LLMError):
    """The model's output never validated against the schema within the retry budget."""

    error_class = "invalid_output"

    def __init__(self, message: str, last_output: str):
        super().__init__(message)
        self.last_output = last_output


class CallFailed(LLMError):
    """Transient errors outlasted the retry budget (attempts or deadline); ``error_class`` is the last
    attempt's."""

    def __init__(self, message: str, error_class: str = "transient"):
        super().__init__(message)
        self.error_class = error_class

    def __reduce__(self) -> tuple:
        return (CallFailed, (str(self), self.error_class))


_CJK_CHAR = re.compile("[\u3000-\u9fff]")


def estimate_tokens(text: str) -> int:
    """Rough token count (≈4 characters a token, at least one per CJK character)."""
    if text.isascii():  # the common case, without a pass over every character
        return max(1, len(text) // 4)
    cjk = len(_CJK_CHAR.findall(text))
    return max(1, (len(text) - cjk) // 4 + cjk)


def dump_json(obj: BaseModel) -> str:
    return obj.model_dump_json()


def loads_lenient(text: str) -> object:
    """Parse a model's JSON reply, tolerating a Markdown code fence or prose around one object."""
    s = text.strip()
    if s.startswith("```"):
        s = s.split("\n", 1)[1] if "\n" in s else ""
        s = s.rsplit("```", 1)[0]
    try:
        return json.loads(s)
    except json.JSONDecodeError:
        start, end = s.find("{"), s.rfind("}")
        if 0 <= start < end:
            return json.loads(s[start : end + 1])
        raise
