"""A memory system served elsewhere, reached through the memory protocol (docs/memory-protocol.md).

``--systems http://host:port`` (or ``NAME=URL``, or a name from ``[evaluation.remote]``) is resolved
here: ``GET /v1/info`` names it (unless the user did), and a ``RemoteSystem`` subclass bound to the
URL is registered under that label, so the rest of the evaluation treats it as any other system.
It is fed by chronological replay only (``replay_only``): the server is given the past and nothing
later, with release ids, never warehouse ids. Its retrievals are never served from the task cache
(``cacheable``): the service behind the URL may change between runs without its code here changing;
only a run that resumes an interrupted one reuses the replies that one got (:class:`Memo`).

Every call is bounded (``clonemem.memory.transport``): an attempt by ``timeout_s`` from connecting to
the reply's last byte, a reply by ``max_reply_bytes``; transport errors and 5xx replies are tried
again with exponential backoff, so a call ends within :meth:`RemoteOptions.call_bound_s`. A 4xx, a
reply that is not JSON or lacks a field, a reply too large, a protocol major version this end does
not read, or a server still failing after the retries raise ``MemorySystemFailed`` naming the URL,
the call, the attempts and the time taken; the system's other calls then stop at once.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from json import dumps, loads
from typing import Any, ClassVar, TypeVar
from urllib.parse import urlencode, urlsplit

from pydantic import BaseModel, ConfigDict, ValidationError

from clonemem.ids import stable_hash
from clonemem.memory.base import (
    SYSTEMS,
    BuildContext,
    MemorySystem,
    MemoryTrace,
    QuestionView,
    Retrieved,
)
from clonemem.memory.errors import MemorySystemFailed
from clonemem.memory.transport import Connection, Reply, ReplyTooLarge, TransportFailed
from clonemem.registry import RegistryError
from clonemem.schemas.memory_protocol import VERSION, Info, Item, Items, Ready, version_refused

M = TypeVar("M", bound=BaseModel)

INGEST_BATCH = 500  # traces per POST /v1/ingest
BACKOFF_S = 0.25  # first retry's wait; doubled for each further one
NOT_OFFERED = frozenset(
    {404, 405, 501}
)  # an optional call (GET /v1/stored, /v1/ready) the server does not offer
SPLIT_WAITS_TO_WARN = 3  # replies showing the delayed-ACK wait before the run warns (once)
READY_POLL_S = (0.01, 0.5)  # first and longest wait between GET /v1/ready polls
log = logging.getLogger(__name__)


class RemoteOptions(BaseModel):
    model_config = ConfigDict(frozen=True)

    timeout_s: float = 60.0  # one attempt, connect to last byte
    retries: int = 3
    concurrency: int = 4
    max_reply_bytes: int = 8 * 1024 * 1024
    ready_s: float = 120.0
    quickack: bool = (
        True  # ask for immediate ACKs (Linux); off only to observe the delayed-ACK wait
    )

    def call_bound_s(self) -> float:
        """The longest one call can take: every attempt to its deadline, and the waits between them."""
        return (self.retries + 1) * self.timeout_s + sum(
            BACKOFF_S * 2**i for i in range(self.retries)
        )


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


def _attempts(n: int) -> str:
    return f"{n} attempt{'' if n == 1 else 's'}"


# -- the client ---------------------------------------------------------------------------------


class _Pool:
    """Kept-alive connections to one server for one evaluation, at most ``concurrency`` calls in
    flight. Once a call has failed for good the pool is broken: calls in flight are cut off (their
    sockets shut) and later ones refused, so a stuck server ends the evaluation within one call's bound."""

    def __init__(self, url: str, options: RemoteOptions) -> None:
        parts = urlsplit(url)
        self.url, self.options = url, options
        self.https, self.host = parts.scheme == "https", parts.hostname or ""
        self.port = parts.port or (443 if self.https else 80)
        self.base = parts.path.rstrip("/")
        self._idle: list[Connection] = []
        self._busy: set[Connection] = set()
        self._lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(options.concurrency)
        self.broken: str | None = None
        self.split_waits = 0
        self._warned = False

    def slot(self) -> threading.BoundedSemaphore:
        """Held for a whole call, its retries included: at most ``concurrency`` calls in flight, and a
        call's deadline starts once it holds one (waiting for a slot is no part of its bound)."""
        return self._slots

    def request(self, method: str, path: str, body: bytes | None, deadline_at: float) -> Reply:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        with self._lock:
            conn = self._idle.pop() if self._idle else None
            conn = conn or Connection(self.host, self.port, self.https, self.options.quickack)
            self._busy.add(conn)
        try:
            try:
                reply = conn.request(
                    method,
                    self.base + path,
                    headers,
                    body,
                    deadline_at,
                    self.options.max_reply_bytes,
                )
            except TransportFailed as exc:
                if not exc.stale or self.broken:
                    raise
                # a kept-alive connection the server closed while idle: once more on a fresh one,
                # within the same deadline (never after a timeout: that would double the wait)
                reply = conn.request(
                    method,
                    self.base + path,
                    headers,
                    body,
                    deadline_at,
                    self.options.max_reply_bytes,
                )
        finally:
            with self._lock:
                self._busy.discard(conn)
                if conn.sock is not None and not self.broken:
                    self._idle.append(conn)
        if reply.split_wait:
            self._split_wait()
        return reply

    def _split_wait(self) -> None:
        with self._lock:
            self.split_waits += 1
            warn = self.split_waits >= SPLIT_WAITS_TO_WARN and not self._warned
            self._warned = self._warned or warn
        if warn:
            log.warning(
                "memory server %s: its replies wait ~40 ms each: it writes a reply's headers and body "
                "separately and the body waits for the harness's delayed ACK; set TCP_NODELAY on its "
                "sockets (Python's BaseHTTPRequestHandler: disable_nagle_algorithm = True) or write "
                "each reply at once (docs/memory-protocol.md, Latency)",
                self.url,
            )

    def break_off(self, reason: str) -> None:
        """No more calls: cut those in flight, refuse those to come."""
        with self._lock:
            if self.broken is not None:
                return
            self.broken = reason
            busy, idle, self._idle = list(self._busy), self._idle, []
        for conn in idle:
            conn.close()
        for conn in busy:
            sock = conn.sock
            if sock is not None:
                try:
                    sock.shutdown(2)  # wakes a thread blocked reading it
                except OSError:
                    pass

    def close(self) -> None:
        with self._lock:
            conns, self._idle = self._idle, []
        for conn in conns:
            conn.close()


class Client:
    """The protocol's calls against one base URL, for the system labelled ``system``."""

    def __init__(
        self, system: str, url: str, options: RemoteOptions, pool: _Pool | None = None
    ) -> None:
        self.system, self.url, self.options = system, url.rstrip("/"), options
        self._pool = pool or _Pool(self.url, options)

    def fail(self, call: str, message: str) -> MemorySystemFailed:
        return MemorySystemFailed(self.system, f"{self.url}: {call}: {message}")

    def call(
        self,
        method: str,
        path: str,
        reply: type[M] | None = None,
        *,
        json: Any = None,
        params: dict[str, str] | None = None,
        optional: bool = False,
    ) -> M | None:
        """One call, retried on transport errors and 5xx; the validated reply (None: no reply model, or
        an ``optional`` call the server does not offer). Any failure breaks the pool off."""
        try:
            return self._call(method, path, reply, json, params, optional)
        except MemorySystemFailed as exc:
            self._pool.break_off(str(exc))
            raise

    def _call(
        self,
        method: str,
        path: str,
        reply: type[M] | None,
        json: Any,
        params: dict[str, str] | None,
        optional: bool,
    ) -> M | None:
        call = f"{method} {path}"
        target = f"{path}?{urlencode(params)}" if params else path
        body = None if json is None else dumps(json, ensure_ascii=False).encode("utf-8")
        with self._pool.slot():
            got = self._exchange(call, method, target, body)
        if optional and got.status in NOT_OFFERED:
            return None
        if not 200 <= got.status < 300:
            raise self.fail(call, f"HTTP {got.status}: {_snippet(got.body)}")
        return None if reply is None else self._parsed(call, got.body, reply)

    def _exchange(self, call: str, method: str, target: str, body: bytes | None) -> Reply:
        """The reply to the first attempt that got one below 500; tried again after a transport failure or
        a 5xx, each attempt bounded by ``timeout_s``."""
        started = time.monotonic()
        # the call's own deadline: attempts and waits never add up to more than the stated bound, however
        # late a loaded machine wakes a thread
        deadline = started + self.options.call_bound_s()
        for attempt in range(1, self.options.retries + 2):
            last = attempt == self.options.retries + 1
            if self._pool.broken:
                raise self.fail(call, "not sent: another call to this server failed for good")
            try:
                got = self._pool.request(
                    method, target, body, min(time.monotonic() + self.options.timeout_s, deadline)
                )
            except ReplyTooLarge as exc:
                size = (
                    f" (its Content-Length is {exc.declared})" if exc.declared is not None else ""
                )
                raise self.fail(
                    call,
                    f"the reply is larger than evaluation.remote_max_reply_bytes = {exc.limit} "
                    f"bytes{size}; no more was read",
                ) from None
            except TransportFailed as exc:
                if self._pool.broken:
                    raise self.fail(
                        call, "cut off: another call to this server failed for good"
                    ) from None
                if last:
                    what = (
                        f"no complete reply within evaluation.remote_timeout_s = {self.options.timeout_s:g} s "
                        "per attempt"
                        if exc.kind == "timed out"
                        else f"{exc.kind} ({exc.detail})"
                    )
                    raise self._gave_up(call, attempt, started, what) from None
            else:
                if got.status < 500:
                    return got
                if last:
                    raise self._gave_up(
                        call, attempt, started, f"HTTP {got.status}: {_snippet(got.body)}"
                    )
            time.sleep(max(0.0, min(BACKOFF_S * 2 ** (attempt - 1), deadline - time.monotonic())))
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _parsed(self, call: str, data: bytes, reply: type[M]) -> M:
        try:
            parsed = loads(data)
        except ValueError:
            raise self.fail(call, f"reply is not JSON: {_snippet(data)}") from None
        refused = (
            version_refused(parsed.get("format_version")) if isinstance(parsed, dict) else None
        )
        if refused:
            raise self.fail(call, f"reply field format_version: {refused}")
        try:
            return reply.model_validate(parsed)
        except ValidationError as exc:
            err = exc.errors(include_url=False)[0]
            what = "is missing" if err["type"] == "missing" else f"is invalid: {err['msg']}"
            raise self.fail(call, f"reply field {_field(err['loc'])} {what}") from None

    def _gave_up(self, call: str, attempts: int, started: float, why: str) -> MemorySystemFailed:
        return self.fail(
            call, f"failed after {_attempts(attempts)} in {time.monotonic() - started:.1f} s: {why}"
        )


def _snippet(data: bytes, n: int = 120) -> str:
    text = " ".join(data.decode("utf-8", "replace").split())
    return (text[: n - 3] + "...") if len(text) > n else (text or "(empty)")


# -- the system ---------------------------------------------------------------------------------


# Replies already got (an interrupted run's): ``memo(key, ask)`` returns what ``ask()`` returned under ``key``
# before, else calls it and keeps its result (a JSON value).
Memo = Callable[[str, Callable[[], Any]], Any]


class RemoteSystem(MemorySystem):
    """A memory system behind a URL; subclasses made by :func:`remote_system` bind the URL, what
    ``/v1/info`` said and the connection pool of the evaluation."""

    url: ClassVar[str]
    options: ClassVar[RemoteOptions] = RemoteOptions()
    info: ClassVar[Info]
    pool: ClassVar[_Pool]
    replay_only = True
    cacheable = False

    def __init__(self) -> None:
        self._client = Client(self.name, self.url, self.options, self.pool)
        self._persona = ""
        self._release: dict[str, str] = {}  # warehouse id -> release id (identity when not given)
        self._given: dict[str, MemoryTrace] = {}  # by release id: what the server was sent
        self._stored: list[Retrieved] | None = None  # GET /v1/stored since the last ingest
        self._memo: Memo | None = None
        self._unsent: list[
            tuple[str, dict]
        ] = []  # (path, body) held back while replies come from the memo
        self._async = "async_indexing" in self.info.features

    # -- the calls ------------------------------------------------------------------------------

    def reset(self, ctx: BuildContext) -> None:
        self._persona, self._release = ctx.persona_id, dict(ctx.release_ids)
        self._given, self._stored, self._memo, self._unsent = {}, None, ctx.memo, []
        self._send(
            "/v1/reset",
            {
                "format_version": VERSION,
                "persona_id": self._persona,
                "language": ctx.language,
                "name": ctx.persona_name or None,
            },
        )

    def build(self, traces: Sequence[MemoryTrace], ctx: BuildContext) -> None:
        raise MemorySystemFailed(
            self.name,
            f"{self.url}: a remote system is fed by chronological replay "
            "(reset, then ingest between questions), never given the whole history",
        )

    def ingest(self, traces: Sequence[MemoryTrace], ctx: BuildContext) -> None:
        self._stored = None
        for start in range(0, len(traces), INGEST_BATCH):
            batch = []
            for t in traces[start : start + INGEST_BATCH]:
                rid = self._release.get(t.trace_id, t.trace_id)
                self._given[rid] = t
                batch.append(trace_body(rid, t))
            self._send(
                "/v1/ingest",
                {"format_version": VERSION, "persona_id": self._persona, "traces": batch},
            )
        ctx.stats["items"] = len(self._given)

    def retrieve(self, question: QuestionView, k: int) -> list[Retrieved]:
        call = "POST /v1/query"
        body = {
            "format_version": VERSION,
            "persona_id": self._persona,
            "question_id": self._release.get(question.question_id, question.question_id),
            "question": question.question,
            "question_time": protocol_time(question.question_time),
            "k": k,
            "ks": sorted(set(question.ks)) or [k],
            "recipient": question.recipient,
        }

        def ask() -> Items | None:
            self._flush()
            return self._client.call("POST", "/v1/query", Items, json=body)

        reply = self._remembered(call, body, ask)
        assert reply is not None
        if len(reply.items) > k:
            raise self._client.fail(
                call, f"reply field items has {len(reply.items)} items, more than k = {k}"
            )
        return self._items(reply.items, call)

    def stored(self, as_of: dt.datetime | None = None) -> list[Retrieved]:
        """What the server holds now. Replay asks once per question time, right after the first question
        that follows an ingest, when the server holds exactly what was dated at or before it (``as_of``);
        the answer stands until the next ingest; and at the end."""
        if self._stored is None:

            def ask() -> Items | None:
                self._flush()
                return self._client.call(
                    "GET", "/v1/stored", Items, params={"persona_id": self._persona}, optional=True
                )

            got = self._remembered("GET /v1/stored", {"persona_id": self._persona}, ask)
            if got is None:
                raise NotImplementedError(f"{self.url} does not offer GET /v1/stored")
            self._stored = self._items(got.items, "GET /v1/stored")
        return self._stored

    # -- sending, waiting, remembering ------------------------------------------------------------

    def _send(self, path: str, body: dict) -> None:
        """A reset or ingest: at once, or, while replies come from a memo, when a reply is not there."""
        self._unsent.append((path, body))
        if self._memo is None:
            self._flush()

    def _flush(self) -> None:
        ingested = False
        while self._unsent:
            path, body = self._unsent.pop(0)
            self._client.call("POST", path, json=body)
            ingested = ingested or path == "/v1/ingest"
        if ingested and self._async:
            self._wait_ready()

    def _wait_ready(self) -> None:
        """Poll ``GET /v1/ready`` until the server has indexed what it was sent (``options.ready_s``)."""
        started, pause = time.monotonic(), READY_POLL_S[0]
        while True:
            got = self._client.call(
                "GET", "/v1/ready", Ready, params={"persona_id": self._persona}, optional=True
            )
            if got is None or got.ready:
                return
            waited = time.monotonic() - started
            if waited + pause > self.options.ready_s:
                raise self._client.fail(
                    "GET /v1/ready",
                    f"still not ready {waited:.1f} s after the ingest "
                    f"(evaluation.remote_ready_s = {self.options.ready_s:g} s)",
                )
            time.sleep(pause)
            pause = min(pause * 2, READY_POLL_S[1])

    def _remembered(self, call: str, body: dict, ask: Callable[[], Items | None]) -> Items | None:
        """``ask()``, or its reply from the memo: keyed by the server (URL, /v1/info name and version),
        the call and its body, and the replay position (the traces given so far)."""
        if self._memo is None:
            return ask()
        last = next(reversed(self._given), "")
        key = stable_hash(
            "|".join(
                [
                    self.url,
                    self.info.name,
                    self.info.version,
                    call,
                    dumps(body, sort_keys=True, ensure_ascii=False),
                    str(len(self._given)),
                    last,
                ]
            ),
            32,
        )

        def asked() -> dict | None:
            got = ask()
            return None if got is None else got.model_dump(mode="json")

        kept = self._memo(key, asked)
        return None if kept is None else Items.model_validate(kept)

    def _items(self, items: Sequence[Item], call: str) -> list[Retrieved]:
        """Items with warehouse trace ids; every id must be one the server was given."""
        out = []
        for n, item in enumerate(items):
            traces = []
            for j, rid in enumerate(item.trace_ids):
                if rid not in self._given:
                    raise self._client.fail(
                        call,
                        f"reply field items[{n}].trace_ids[{j}] names trace {rid!r}, "
                        "which was never given to it",
                    )
                traces.append(self._given[rid])
            # an item that is one of its traces word for word is raw; anything else is a transformation,
            # which the write diagnosis checks against the gold statement (as for a built-in's facts)
            raw = any(item.text == t.content for t in traces)
            out.append(
                Retrieved(
                    item.text,
                    tuple(t.trace_id for t in traces),
                    0.0 if item.score is None else item.score,
                    "trace" if raw else "memory",
                )
            )
        return out


def trace_body(release_id: str, t: MemoryTrace) -> dict[str, Any]:
    """A trace as ``POST /v1/ingest`` carries it. ``content`` is the text every system reads (what the
    source inlines included: ``"Caroline: ... [shares a photo: ...]"``); the 1.2 fields repeat the
    source's structure as data (null or empty where it has none, e.g. a generated trace)."""
    return {
        "trace_id": release_id,
        "medium": t.medium,
        "event_date": protocol_time(t.event_date),
        "content": t.content,
        "reached": list(t.reached),
        "speaker": t.speaker,
        "session_id": t.session_key,
        "session_date": protocol_time(t.session_date) if t.session_date else None,
        "attachments": [{"caption": a.caption, "url": a.url} for a in t.attachments],
    }


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


def spoken(info: Info) -> str:
    """The protocol version both ends speak: the server's (a server that does not say speaks 1.1, whose
    fields 1.2 only adds to) or this end's, whichever is older."""
    theirs = info.protocol or "1.1"

    def key(version: str) -> tuple[int, ...]:
        return tuple(int(p) for p in ([*version.split("."), "0"])[:2])

    return theirs if key(theirs) < key(VERSION) else VERSION


def remote_system(name: str | None, url: str, options: RemoteOptions) -> type[RemoteSystem]:
    """A ``RemoteSystem`` class for ``url``, labelled ``name`` or, when None, by its ``/v1/info`` name.
    Its identity is the URL and what ``/v1/info`` says (name, version, protocol, features): there is no
    code of it here to hash."""
    url = url.rstrip("/")
    pool = _Pool(url, options)
    client = Client(name or url, url, options, pool)
    info = client.call("GET", "/v1/info", Info)
    assert info is not None
    refused = version_refused(info.protocol)
    if refused:
        raise client.fail("GET /v1/info", f"reply field protocol: {refused}")
    label = name or info.name
    protocol = spoken(info)
    extra = {
        "url": url,
        "name": info.name,
        "version": info.version,
        "protocol": protocol,
        "features": ",".join(sorted(set(info.features))),
    }
    return type(
        f"Remote_{abs(hash((label, url)))}",
        (RemoteSystem,),
        {
            "name": label,
            "url": url,
            "options": options,
            "info": info,
            "pool": pool,
            "provenance_extra": extra,
            "__module__": __name__,
            "__doc__": f"{info.name} {info.version} at {url} (memory protocol {protocol})",
        },
    )


def options_of(evaluation: Any) -> RemoteOptions:
    """The remote options of a run's ``evaluation`` config section."""
    return RemoteOptions(
        timeout_s=evaluation.remote_timeout_s,
        retries=evaluation.remote_retries,
        concurrency=evaluation.remote_concurrency,
        max_reply_bytes=evaluation.remote_max_reply_bytes,
        ready_s=evaluation.remote_ready_s,
    )


def refuse_registered_labels(specs: Sequence[str], remote: dict[str, str]) -> None:
    """A remote system named like a registered one (``bm25=URL``) is a usage error, found before any call."""
    for spec in specs:
        parsed = parse_spec(spec, remote)
        if parsed is not None and parsed[0] is not None and _registered(parsed[0]):
            raise LabelTaken(
                f"{parsed[0]!r} is a registered system: give the remote system at {parsed[1]} another "
                f"name (--systems NAME={parsed[1]})"
            )


class LabelTaken(RegistryError):
    """A remote system's label is a registered system's name: the user's usage error (exit 2)."""


def resolve_systems(
    specs: Sequence[str], remote: dict[str, str], options: RemoteOptions
) -> list[tuple[str, type[RemoteSystem] | None]]:
    """(label, class) per spec: registered names as they are (class None); each remote spec asked for
    its ``/v1/info`` (again on every run: its version may have changed) and labelled."""
    refuse_registered_labels(specs, remote)
    out: list[tuple[str, type[RemoteSystem] | None]] = []
    urls: dict[str, str] = {}
    for spec in specs:
        parsed = parse_spec(spec, remote)
        if parsed is None:
            out.append((spec, None))
            continue
        cls = remote_system(*parsed, options)
        label = cls.name
        if label in urls and urls[label] != cls.url:
            raise RegistryError(
                f"two remote systems are called {label!r} ({urls[label]}, {cls.url}); name them: "
                "--systems NAME=URL"
            )
        if _registered(label):
            raise LabelTaken(
                f"{label!r} is a registered system: give the remote system at {cls.url} another "
                f"name (--systems NAME={cls.url})"
            )
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
                stack.callback(cls.pool.close)
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
