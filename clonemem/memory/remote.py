"""A memory system served elsewhere, reached through the memory protocol (docs/memory-protocol.md).

``--systems http://host:port`` (or ``NAME=URL``, or a name from ``[evaluation.remote]``) is resolved
here: ``GET /v1/info`` names it (unless the user did), and a ``RemoteSystem`` subclass bound to the
URL is registered under that label, so the rest of the evaluation treats it as any other system.
It is fed by chronological replay only (``replay_only``): the server is given the past and nothing
later, with release ids, never warehouse ids. Its retrievals are never cached (``cacheable``): the
service behind the URL may change between runs without its code here changing.

Transport errors and 5xx replies are retried with exponential backoff; a 4xx, a reply that is not
JSON or lacks a field, or a server still failing after the retries raise ``MemorySystemFailed``
naming the URL, the call and the field.
"""

from __future__ import annotations

import datetime as dt
import http.client
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from json import dumps, loads
from typing import Any, ClassVar, TypeVar
from urllib.parse import urlencode, urlsplit

from pydantic import BaseModel, ConfigDict, ValidationError

from clonemem.memory.base import SYSTEMS, BuildContext, MemorySystem, MemoryTrace, QuestionView, Retrieved
from clonemem.memory.errors import MemorySystemFailed
from clonemem.registry import RegistryError
from clonemem.schemas.memory_protocol import Info, Item, Items

M = TypeVar("M", bound=BaseModel)

PROTOCOL_VERSION = "v1"
INGEST_BATCH = 500  # traces per POST /v1/ingest
BACKOFF_S = 0.25  # first retry's wait; doubled for each further one
NOT_OFFERED = frozenset({404, 405, 501})  # an optional call (GET /v1/stored) the server does not offer


class RemoteOptions(BaseModel):
    model_config = ConfigDict(frozen=True)

    timeout_s: float = 60.0
    retries: int = 3
    concurrency: int = 4


def _field(loc: Sequence[str | int]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(the reply)"


def protocol_time(t: dt.datetime) -> str:
    """``YYYY-MM-DDTHH:MM:SS`` (aware times in UTC, as the warehouse stores them)."""
    if t.tzinfo is not None:
        t = t.astimezone(dt.UTC).replace(tzinfo=None)
    return t.strftime("%Y-%m-%dT%H:%M:%S")


# -- the client ---------------------------------------------------------------------------------

class TransportFailed(Exception):
    """The call did not get a reply: refused, reset, timed out."""


class _Pool:
    """Kept-alive connections to one server (the standard library's: a request leaves in one write, and
    costs a fraction of a millisecond of client time), at most ``size`` calls in flight."""

    def __init__(self, url: str, options: RemoteOptions) -> None:
        parts = urlsplit(url)
        self.https, self.host, self.port = parts.scheme == "https", parts.hostname or "", parts.port
        self.base = parts.path.rstrip("/")
        self.timeout = options.timeout_s
        self._idle: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(options.concurrency)

    def _connect(self) -> http.client.HTTPConnection:
        cls = http.client.HTTPSConnection if self.https else http.client.HTTPConnection
        return cls(self.host, self.port, timeout=self.timeout)

    def request(self, method: str, path: str, body: bytes | None) -> tuple[int, bytes]:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        with self._slots:
            with self._lock:
                conn = self._idle.pop() if self._idle else None
            # a kept-alive connection the server has closed fails at once: one more try on a fresh one
            for fresh in ((False, True) if conn is not None else (True,)):
                if fresh:
                    conn = self._connect()
                assert conn is not None
                try:
                    conn.request(method, self.base + path, body=body, headers=headers)
                    response = conn.getresponse()
                    data = response.read()
                except (OSError, http.client.HTTPException) as exc:
                    conn.close()
                    if fresh:
                        kind = "timed out" if isinstance(exc, TimeoutError) else "unreachable"
                        raise TransportFailed(f"{kind} ({type(exc).__name__}: {exc or 'no detail'})") from None
                    continue
                if response.will_close:
                    conn.close()
                else:
                    with self._lock:
                        self._idle.append(conn)
                return response.status, data
        raise AssertionError("unreachable")


_POOLS: dict[tuple[str, RemoteOptions], _Pool] = {}
_POOLS_LOCK = threading.Lock()


def _pool(url: str, options: RemoteOptions) -> _Pool:
    """One pool per URL for the whole process: every persona's task shares its connections and limit."""
    with _POOLS_LOCK:
        return _POOLS.setdefault((url, options), _Pool(url, options))


class Client:
    """The protocol's calls against one base URL, for the system labelled ``system``."""

    def __init__(self, system: str, url: str, options: RemoteOptions) -> None:
        self.system, self.url, self.options = system, url.rstrip("/"), options
        self._pool = _pool(self.url, options)

    def fail(self, call: str, message: str) -> MemorySystemFailed:
        return MemorySystemFailed(self.system, f"{self.url}: {call}: {message}")

    def call(self, method: str, path: str, reply: type[M] | None = None, *, json: Any = None,
             params: dict[str, str] | None = None, optional: bool = False) -> M | None:
        """One call, retried on transport errors and 5xx; the validated reply (None: no reply model, or
        an ``optional`` call the server does not offer)."""
        call = f"{method} {path}"
        target = f"{path}?{urlencode(params)}" if params else path
        body = None if json is None else dumps(json, ensure_ascii=False).encode("utf-8")
        for attempt in range(self.options.retries + 1):
            last = attempt == self.options.retries
            try:
                status, data = self._pool.request(method, target, body)
            except TransportFailed as exc:
                if last:
                    what, _, detail = str(exc).partition(" ")
                    raise self.fail(call, f"{what} after {attempt + 1} attempts {detail}") from None
            else:
                if status < 500:
                    break
                if last:
                    raise self.fail(call, f"HTTP {status} after {attempt + 1} attempts: {_snippet(data)}")
            time.sleep(BACKOFF_S * 2**attempt)
        if optional and status in NOT_OFFERED:
            return None
        if not 200 <= status < 300:
            raise self.fail(call, f"HTTP {status}: {_snippet(data)}")
        if reply is None:
            return None
        try:
            parsed = loads(data)
        except ValueError:
            raise self.fail(call, f"reply is not JSON: {_snippet(data)}") from None
        try:
            return reply.model_validate(parsed)
        except ValidationError as exc:
            err = exc.errors(include_url=False)[0]
            what = "is missing" if err["type"] == "missing" else f"is invalid: {err['msg']}"
            raise self.fail(call, f"reply field {_field(err['loc'])} {what}") from None


def _snippet(data: bytes, n: int = 120) -> str:
    text = " ".join(data.decode("utf-8", "replace").split())
    return (text[: n - 3] + "...") if len(text) > n else (text or "(empty)")


# -- the system ---------------------------------------------------------------------------------


class RemoteSystem(MemorySystem):
    """A memory system behind a URL; subclasses made by :func:`remote_system` bind the URL."""

    url: ClassVar[str]
    options: ClassVar[RemoteOptions] = RemoteOptions()
    replay_only = True
    cacheable = False

    def __init__(self) -> None:
        self._client = Client(self.name, self.url, self.options)
        self._persona = ""
        self._release: dict[str, str] = {}  # warehouse id -> release id (identity when not given)
        self._given: dict[str, MemoryTrace] = {}  # by release id: what the server was sent
        self._stored: list[Retrieved] | None = None  # GET /v1/stored since the last ingest

    def reset(self, ctx: BuildContext) -> None:
        self._persona, self._release = ctx.persona_id, dict(ctx.release_ids)
        self._given, self._stored = {}, None
        self._client.call("POST", "/v1/reset", json={"persona_id": self._persona, "language": ctx.language})

    def build(self, traces: Sequence[MemoryTrace], ctx: BuildContext) -> None:
        raise MemorySystemFailed(self.name, f"{self.url}: a remote system is fed by chronological replay "
                                            "(reset, then ingest between questions), never given the whole history")

    def ingest(self, traces: Sequence[MemoryTrace], ctx: BuildContext) -> None:
        self._stored = None
        for start in range(0, len(traces), INGEST_BATCH):
            batch = []
            for t in traces[start:start + INGEST_BATCH]:
                rid = self._release.get(t.trace_id, t.trace_id)
                self._given[rid] = t
                batch.append({"trace_id": rid, "medium": t.medium, "event_date": protocol_time(t.event_date),
                              "content": t.content, "reached": list(t.reached)})
            self._client.call("POST", "/v1/ingest", json={"persona_id": self._persona, "traces": batch})
        ctx.stats["items"] = len(self._given)

    def retrieve(self, question: QuestionView, k: int) -> list[Retrieved]:
        call = "POST /v1/query"
        reply = self._client.call("POST", "/v1/query", Items, json={
            "persona_id": self._persona, "question_id": self._release.get(question.question_id, question.question_id),
            "question": question.question, "question_time": protocol_time(question.question_time), "k": k,
            "recipient": question.recipient})
        assert reply is not None
        if len(reply.items) > k:
            raise self._client.fail(call, f"reply field items has {len(reply.items)} items, more than k = {k}")
        return self._items(reply.items, call)

    def stored(self, as_of: dt.datetime | None = None) -> list[Retrieved]:
        """What the server holds now. Replay asks right after a question, when the server holds exactly
        what was dated at or before it (``as_of``), and at the end, when it holds everything."""
        if self._stored is None:
            reply = self._client.call("GET", "/v1/stored", Items, params={"persona_id": self._persona}, optional=True)
            if reply is None:
                raise NotImplementedError(f"{self.url} does not offer GET /v1/stored")
            self._stored = self._items(reply.items, "GET /v1/stored")
        return self._stored

    def _items(self, items: Sequence[Item], call: str) -> list[Retrieved]:
        """Items with warehouse trace ids; every id must be one the server was given."""
        out = []
        for n, item in enumerate(items):
            traces = []
            for j, rid in enumerate(item.trace_ids):
                if rid not in self._given:
                    raise self._client.fail(call, f"reply field items[{n}].trace_ids[{j}] names trace {rid!r}, "
                                                  "which was never given to it")
                traces.append(self._given[rid])
            # an item that is one of its traces word for word is raw; anything else is a transformation,
            # which the write diagnosis checks against the gold statement (as for a built-in's facts)
            raw = any(item.text == t.content for t in traces)
            out.append(Retrieved(item.text, tuple(t.trace_id for t in traces),
                                 0.0 if item.score is None else item.score, "trace" if raw else "memory"))
        return out


# -- naming remote systems ----------------------------------------------------------------------


def is_url(text: str) -> bool:
    return text.startswith(("http://", "https://"))


def parse_spec(spec: str, remote: dict[str, str]) -> tuple[str | None, str] | None:
    """(name or None, URL) for a remote system spec (``URL``, ``NAME=URL``, a ``remote`` name); None for
    a registered system's name."""
    if is_url(spec):
        return None, spec
    name, eq, url = spec.partition("=")
    if eq and is_url(url.strip()):
        if not name.strip():
            raise RegistryError(f"remote system {spec!r}: the name before '=' is empty")
        return name.strip(), url.strip()
    if spec in remote:
        return spec, remote[spec]
    return None


def remote_system(name: str | None, url: str, options: RemoteOptions) -> type[RemoteSystem]:
    """A ``RemoteSystem`` class for ``url``, labelled ``name`` or, when None, by its ``/v1/info`` name."""
    info = Client(name or url, url, options).call("GET", "/v1/info", Info)
    assert info is not None
    label = name or info.name
    extra = {"remote_url": url.rstrip("/"), "remote_name": info.name, "remote_version": info.version,
             "protocol": PROTOCOL_VERSION}
    return type(f"Remote_{abs(hash((label, url)))}", (RemoteSystem,),
                {"name": label, "url": url.rstrip("/"), "options": options, "provenance_extra": extra,
                 "__doc__": f"{info.name} {info.version} at {url} (memory protocol {PROTOCOL_VERSION})"})


def options_of(evaluation: Any) -> RemoteOptions:
    """The remote options of a run's ``evaluation`` config section."""
    return RemoteOptions(timeout_s=evaluation.remote_timeout_s, retries=evaluation.remote_retries,
                         concurrency=evaluation.remote_concurrency)


def resolve_systems(specs: Sequence[str], remote: dict[str, str], options: RemoteOptions) -> list[tuple[str, type | None]]:
    """(label, class) per spec: registered names as they are (class None); each remote spec asked for
    its ``/v1/info`` (again on every run: its version may have changed) and labelled."""
    out: list[tuple[str, type | None]] = []
    urls: dict[str, str] = {}
    for spec in specs:
        parsed = parse_spec(spec, remote)
        if parsed is None:
            out.append((spec, None))
            continue
        cls = remote_system(*parsed, options)
        label = cls.name
        if label in urls and urls[label] != cls.url:
            raise RegistryError(f"two remote systems are called {label!r} ({urls[label]}, {cls.url}); name them: "
                                "--systems NAME=URL")
        if _registered(label):
            raise RegistryError(f"{label!r} is a registered system: give the remote system at {cls.url} another "
                                f"name (--systems NAME={cls.url})")
        urls[label] = cls.url
        out.append((label, cls))
    return out


@contextmanager
def registered(specs: Sequence[str], evaluation: Any) -> Iterator[list[str]]:
    """The labels of ``specs``, with every remote one registered under its label while the block runs
    (an evaluation's tasks look systems up by label); nothing stays registered afterwards."""
    resolved = resolve_systems(specs, evaluation.remote, options_of(evaluation))
    with ExitStack() as stack:
        for label, cls in resolved:
            if cls is not None:
                stack.enter_context(SYSTEMS.added(label, cls))
        yield [label for label, _ in resolved]


def _registered(label: str) -> bool:
    """Whether ``label`` names a system of this process (a built-in, a plugin), not a remote one."""
    if label not in SYSTEMS:
        return False
    try:
        factory = SYSTEMS.get(label)
    except RegistryError:
        return False
    return not (isinstance(factory, type) and issubclass(factory, RemoteSystem))
