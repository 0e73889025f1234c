"""`clonemem serve-memory SYSTEM`: any registered memory system over the memory protocol
(docs/memory-protocol.md), bound to 127.0.0.1, so the baselines can be scored by other harnesses.

Per persona the server keeps one instance of the system and feeds it what it is sent through the
system's ``ingest`` (traces sent since the last question are ingested, in time order, when the next
question or ``/v1/stored`` arrives), so it holds only what the harness gave it. ``log`` (a JSONL
file) records, for every query, how many traces the persona had and the latest one's date: what a
test reads to prove no question saw the future.
"""

from __future__ import annotations

import datetime as dt
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, NoReturn, TypeVar
from urllib.parse import parse_qs, urlsplit

from pydantic import BaseModel, ValidationError

from clonemem.codehash import code_hash
from clonemem.memory.base import (
    SYSTEMS,
    Attachment,
    BuildContext,
    MemorySystem,
    MemoryTrace,
    QuestionView,
    declared_only,
    declared_stages,
)
from clonemem.schemas.memory_protocol import (
    VERSION,
    Info,
    IngestRequest,
    Items,
    QueryRequest,
    ResetRequest,
    version_refused,
)

B = TypeVar("B", bound=BaseModel)
MAX_BODY = 256 * 1024 * 1024


class Refused(Exception):
    """A request the server answers with a 4xx and ``{"error": message}``."""

    def __init__(self, status: HTTPStatus, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass
class _Persona:
    language: str
    memory: MemorySystem
    name: str = ""
    pending: list[MemoryTrace] = field(default_factory=list)
    ids: set[str] = field(default_factory=set)  # every trace id received
    held: int = 0
    latest: dt.datetime | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)


class MemoryService:
    """The protocol's calls against one registered system (thread-safe: one lock per persona)."""

    def __init__(
        self,
        system: str,
        llm: Callable[[str, BaseModel], BaseModel],
        seed: int = 0,
        log: Path | None = None,
    ) -> None:
        self.system = system
        self.factory = SYSTEMS.get(system)
        try:
            release = version("clonemem")
        except PackageNotFoundError:  # a source tree that is not installed
            release = "0"
        lists = getattr(self.factory, "stored", MemorySystem.stored) is not MemorySystem.stored
        features = {*getattr(self.factory, "protocol_features", ()), *(["stored"] if lists else [])}
        self.info = Info(
            format_version=VERSION,
            name=f"clonemem-{system}",
            version=f"{release}+{code_hash(self.factory.__module__)[:12]}",
            protocol=VERSION,
            features=sorted(features),
        )
        self._llm = llm
        self._seed = seed
        self._personas: dict[str, _Persona] = {}
        self._lock = threading.Lock()
        self._log = log
        self._log_lock = threading.Lock()

    def _ctx(self, persona_id: str, language: str, name: str = "") -> BuildContext:
        return BuildContext(
            llm=self._llm,
            language=language,
            seed=self._seed,
            persona_id=persona_id,
            persona_name=name,
        )

    def _persona(self, persona_id: str) -> _Persona:
        with self._lock:
            persona = self._personas.get(persona_id)
        if persona is None:
            raise Refused(
                HTTPStatus.NOT_FOUND, f"unknown persona_id {persona_id!r}: POST /v1/reset first"
            )
        return persona

    def reset(self, req: ResetRequest) -> None:
        memory = self.factory()
        memory.reset(self._ctx(req.persona_id, req.language, req.name or ""))
        with self._lock:
            self._personas[req.persona_id] = _Persona(req.language, memory, req.name or "")

    def ingest(self, req: IngestRequest) -> None:
        persona = self._persona(req.persona_id)
        traces = [
            MemoryTrace(
                t.trace_id,
                t.medium,
                dt.datetime.fromisoformat(t.event_date),
                t.content,
                tuple(t.reached),
                t.session_id,
                t.speaker,
                dt.datetime.fromisoformat(t.session_date) if t.session_date else None,
                tuple(Attachment(a.caption, a.url) for a in t.attachments),
            )
            for t in req.traces
        ]
        with persona.lock:
            new = [
                (n, t) for n, t in enumerate(traces) if t.trace_id not in persona.ids
            ]  # a retried batch: once
            latest = persona.latest
            for n, t in new:
                if latest is not None and t.event_date < latest:
                    raise Refused(
                        HTTPStatus.BAD_REQUEST,
                        f"traces[{n}].event_date {t.event_date.isoformat()} is earlier than a trace already "
                        f"sent ({latest.isoformat()}): send traces in time order",
                    )
                latest = t.event_date
            persona.latest = latest
            persona.ids.update(t.trace_id for _, t in new)
            persona.pending += [t for _, t in new]
            persona.held += len(new)

    def _caught_up(self, persona_id: str, persona: _Persona) -> MemorySystem:
        """The persona's memory with every trace sent so far ingested (call under its lock)."""
        if persona.pending:
            persona.memory.ingest(
                persona.pending, self._ctx(persona_id, persona.language, persona.name)
            )
            persona.pending = []
        return persona.memory

    def query(self, req: QueryRequest) -> Items:
        persona = self._persona(req.persona_id)
        when = dt.datetime.fromisoformat(req.question_time)
        with persona.lock:
            memory = self._caught_up(req.persona_id, persona)
            items = memory.retrieve(
                QuestionView(
                    req.question_id, req.question, when, recipient=req.recipient, ks=tuple(req.ks)
                ),
                req.k,
            )
            self._record(
                {
                    "persona_id": req.persona_id,
                    "question_id": req.question_id,
                    "question_time": req.question_time,
                    "recipient": req.recipient,
                    "held": persona.held,
                    "latest": persona.latest.isoformat() if persona.latest else None,
                }
            )
        return Items.model_validate(
            {
                "format_version": VERSION,
                "items": [
                    {"text": i.text, "trace_ids": list(i.trace_ids), "score": i.score}
                    for i in items[: req.k]
                ],
            }
        )

    def stored(self, persona_id: str) -> Items:
        persona = self._persona(persona_id)
        with persona.lock:
            memory = self._caught_up(persona_id, persona)
            try:
                items = memory.stored()
            except NotImplementedError:
                raise Refused(
                    HTTPStatus.NOT_IMPLEMENTED, f"{self.system} does not list its stored memory"
                ) from None
        return Items.model_validate(
            {
                "format_version": VERSION,
                "items": [{"text": i.text, "trace_ids": list(i.trace_ids)} for i in items],
            }
        )

    def _record(self, entry: dict[str, Any]) -> None:
        if self._log is not None:
            with self._log_lock, self._log.open("a", encoding="utf-8") as f:
                f.write(json.dumps(entry) + "\n")


def _parse(model: type[B], raw: bytes) -> B:
    try:
        data = json.loads(raw or b"null")
    except ValueError as exc:
        raise Refused(HTTPStatus.BAD_REQUEST, f"body is not JSON: {exc}") from None
    refused = version_refused(data.get("format_version")) if isinstance(data, dict) else None
    if refused:
        raise Refused(HTTPStatus.BAD_REQUEST, f"field format_version: {refused}")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        where = ".".join(str(p) for p in err["loc"]) or "body"
        raise Refused(HTTPStatus.UNPROCESSABLE_ENTITY, f"field {where}: {err['msg']}") from None


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: a harness's connection pool reuses one connection
    # headers and body leave in two writes: with Nagle's algorithm the second waits for the client's
    # delayed ACK, 40 ms a reply on loopback
    disable_nagle_algorithm = True
    service: MemoryService

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _send(self, status: int, body: BaseModel | dict | None) -> None:
        data = (
            b""
            if body is None
            else (
                body.model_dump_json() if isinstance(body, BaseModel) else json.dumps(body)
            ).encode("utf-8")
        )
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _handle(self, call: Callable[[], BaseModel | None]) -> None:
        try:
            reply = call()
        except Refused as exc:
            self._send(exc.status, {"error": str(exc)})
        except Exception as exc:  # the system failed: a 500 the harness may retry
            self._send(HTTPStatus.INTERNAL_SERVER_ERROR, {"error": f"{type(exc).__name__}: {exc}"})
        else:
            self._send(HTTPStatus.OK if reply is not None else HTTPStatus.NO_CONTENT, reply)

    def _body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            self.close_connection = True
            raise Refused(
                HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
                f"body over {MAX_BODY} bytes: send smaller batches",
            )
        return self.rfile.read(length)

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        if url.path == "/v1/info":
            self._handle(lambda: self.service.info)
        elif url.path == "/v1/stored":
            persona = parse_qs(url.query).get("persona_id", [""])[0]
            self._handle(
                lambda: (
                    self.service.stored(persona)
                    if persona
                    else _refuse(HTTPStatus.BAD_REQUEST, "query parameter persona_id is missing")
                )
            )
        else:
            self._handle(lambda: _refuse(HTTPStatus.NOT_FOUND, f"no such call: GET {url.path}"))

    def do_POST(self) -> None:
        self._handle(self._post)

    def _post(self) -> BaseModel | None:
        raw = (
            self._body()
        )  # read first: an unread body would corrupt the kept-alive connection's next request
        path = urlsplit(self.path).path
        if path == "/v1/reset":
            self.service.reset(_parse(ResetRequest, raw))
            return None
        if path == "/v1/ingest":
            self.service.ingest(_parse(IngestRequest, raw))
            return None
        if path == "/v1/query":
            return self.service.query(_parse(QueryRequest, raw))
        _refuse(HTTPStatus.NOT_FOUND, f"no such call: POST {path}")


def _refuse(status: HTTPStatus, message: str) -> NoReturn:
    raise Refused(status, message)


def service_for(system: str, config: Any, log: Path | None = None) -> MemoryService:
    """The service of ``system`` with the run config's extractor model for the stages it declares (the
    offline provider by default)."""
    from clonemem.llm.model import get_model
    from clonemem.stages import STAGES

    stages = declared_stages(system)
    model = get_model(config, "extractor") if stages else None

    def run(stage: str, inp: BaseModel) -> BaseModel:
        # declared_only lets through declared stages only, and a system that declares some has a model
        return STAGES.get(stage).run(model, inp)  # type: ignore[arg-type]  # model is set when stages exist

    llm = declared_only(system, stages, run)
    return MemoryService(system, llm, config.seed, log)


def make_server(service: MemoryService, port: int = 0) -> ThreadingHTTPServer:
    """A server on 127.0.0.1 (``port`` 0: a free one; read it from ``server.server_address``)."""
    handler = type("Handler", (_Handler,), {"service": service})
    server = ThreadingHTTPServer(("127.0.0.1", port), handler)
    server.daemon_threads = True
    return server
