"""The memory protocol, version 1.2 (docs/memory-protocol.md): the JSON bodies of its calls.

Both ends use these models: the client of a remote system (``clonemem.memory.remote``) validates
replies with them, ``clonemem serve-memory`` validates requests, and the OpenAPI file in docs/ is
generated from them (``openapi()``; a test keeps the file equal to it). Unknown fields are ignored
on both sides, so a later minor version may add fields. Every body carries ``format_version``; a
reader accepts any 1.x (a body without it is 1.0 or 1.1) and refuses another major version
(:func:`version_refused`).
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

# 1.1 added the optional privacy fields: Trace.reached, QueryRequest.recipient. 1.2 added format_version on
# every body, Info.protocol and .features, Trace.speaker, .session_id, .session_date, .attachments,
# ResetRequest.name, QueryRequest.ks and the optional GET /v1/ready.
VERSION = "1.2"
MAJOR = VERSION.split(".")[0]
# what a server may say it honours (Info.features): the harness reads ``async_indexing`` (it then polls
# GET /v1/ready after ingesting); the others are for the record (provenance) and for readers
FEATURES = ("recipient", "stored", "async_indexing", "speaker", "attachments")
# A time as the benchmark writes it: local to the persona, no zone, to the second.
ProtocolTime = Annotated[
    str, Field(pattern=r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}$", examples=["2024-03-01T18:30:00"])
]
Id = Annotated[str, Field(min_length=1)]


def version_refused(version: str | None) -> str | None:
    """Why a body of protocol ``version`` cannot be read (None: it can: any 1.x, or no version, 1.0/1.1)."""
    if version is None:
        return None
    major, dot, minor = version.partition(".")
    if not (major.isdigit() and (not dot or minor.isdigit())):
        return f"format_version {version!r} is not a version (MAJOR.MINOR)"
    if major != MAJOR:
        return f"memory protocol {version} is not supported: this end reads {MAJOR}.x (up to {VERSION})"
    return None


FormatVersion = Annotated[
    str | None,
    Field(
        description=(
            "since 1.2: the protocol version the body is written in; a reader accepts every 1.x and refuses "
            "another major version; absent: 1.0 or 1.1"
        ),
        examples=[VERSION],
    ),
]


class _Body(BaseModel):
    model_config = ConfigDict(extra="ignore")

    format_version: FormatVersion = None


class Info(_Body):
    """``GET /v1/info``: what the system is called (results are labelled with it), its version, and since
    1.2 the protocol version it speaks and the optional features it honours."""

    name: Id
    version: str
    protocol: str | None = Field(
        None,
        description=(
            'since 1.2: the protocol version the server speaks ("1.2"); absent: 1.0 or 1.1. A harness '
            "refuses a major version it does not know"
        ),
        examples=[VERSION],
    )
    features: list[str] = Field(
        default_factory=list,
        description=(
            "since 1.2: optional parts of the protocol the server honours: recipient (a query's recipient "
            "bounds what it retrieves), stored (GET /v1/stored), async_indexing (it indexes after replying "
            "to ingest: the harness polls GET /v1/ready before asking), speaker, attachments (it reads those "
            "trace fields)"
        ),
        examples=[["recipient", "stored"]],
    )


class ResetRequest(_Body):
    """``POST /v1/reset``: forget everything about this persona; it starts again with no traces."""

    persona_id: Id
    language: str = Field(description="the persona's language: en, zh, ...")
    name: str | None = Field(
        None, description="since 1.2: the person's name, as the benchmark writes it"
    )


class Attachment(_Body):
    """Something shared with a trace (a photo): what the source says of it."""

    caption: str | None = Field(None, description="the source's caption or description of it")
    url: str | None = Field(None, description="where it is, when the source gives it")


class Trace(_Body):
    trace_id: Id = Field(description="the release file's context[].id")
    medium: str = Field(description="diary, chat_private, email, conversation_turn, ...")
    event_date: ProtocolTime
    content: str = Field(
        description=(
            "the trace's text as every system reads it, what the source inlines included (a LoCoMo turn: "
            '"Caroline: ... [shares a photo: ...]"); since 1.2 speaker and attachments repeat those parts as data'
        )
    )
    speaker: str | None = Field(
        None,
        description=(
            "since 1.2: who said or wrote it (a conversation turn's speaker); null when the source does not say"
        ),
    )
    session_id: str | None = Field(
        None,
        description=(
            "since 1.2: the conversation or session the trace belongs to; null when the source has none"
        ),
    )
    session_date: ProtocolTime | None = Field(
        None, description="since 1.2: when that session took place"
    )
    attachments: list[Attachment] = Field(
        default_factory=list,
        description=("since 1.2: what was shared with it (a photo's caption and URL)"),
    )
    reached: list[str] = Field(
        default_factory=list,
        description=(
            "since 1.1: who the trace reached, as relation names (the release file's privacy.recipient names "
            'one), or "*" for everyone (a post, a group chat); empty: nobody but the persona (a diary, a memo)'
        ),
    )


class IngestRequest(_Body):
    """``POST /v1/ingest``: the persona's next traces, in time order; never earlier than a trace already
    sent, and never later than the next question. Idempotent per ``trace_id`` (a retried batch may
    repeat traces: each is kept once)."""

    persona_id: Id
    traces: list[Trace]


class QueryRequest(_Body):
    """``POST /v1/query``: the question, asked at ``question_time``; the system has been given every trace
    dated at or before it, and nothing later."""

    persona_id: Id
    question_id: Id = Field(description="the release file's question id")
    question: str
    question_time: ProtocolTime
    k: Annotated[int, Field(ge=1)]
    ks: list[Annotated[int, Field(ge=1)]] = Field(
        default_factory=list,
        description=(
            "since 1.2: the k values the answers will be scored at (the first k items each); k is their maximum, "
            "or more when a standard protocol scores the ranking deeper"
        ),
    )
    recipient: str | None = Field(
        None,
        description=(
            "since 1.1: a privacy task's asker (a relation name): the clone replies to them, and a boundary-aware "
            "system retrieves only traces that reached them; null: a question to the persona itself"
        ),
    )


class Item(_Body):
    text: str = Field(description="what the answerer is shown")
    trace_ids: list[str] = Field(description="the traces it came from: ids the system was given")
    score: float | None = None


class Items(_Body):
    """The reply of ``POST /v1/query`` (at most k items, best first) and of ``GET /v1/stored``
    (everything the system holds for the persona, in a stable order)."""

    items: list[Item]


class Ready(_Body):
    """The reply of the optional ``GET /v1/ready?persona_id=``: whether everything ingested so far can be
    retrieved (a system that indexes asynchronously)."""

    ready: bool


class Error(_Body):
    error: str


def openapi() -> dict[str, Any]:
    """The protocol as an OpenAPI 3.1 document (docs/memory-protocol.openapi.json)."""
    models = (
        Info,
        ResetRequest,
        Attachment,
        Trace,
        IngestRequest,
        QueryRequest,
        Item,
        Items,
        Ready,
        Error,
    )
    schemas: dict[str, Any] = {}
    for model in models:
        schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
        schemas.update(schema.pop("$defs", {}))
        schemas[model.__name__] = schema

    def ref(name: str) -> dict[str, Any]:
        return {"$ref": f"#/components/schemas/{name}"}

    def body(name: str) -> dict[str, Any]:
        return {"required": True, "content": {"application/json": {"schema": ref(name)}}}

    def reply(name: str | None, what: str) -> dict[str, Any]:
        out: dict[str, Any] = {"description": what}
        if name:
            out["content"] = {"application/json": {"schema": ref(name)}}
        return out

    bad = {
        "4XX": reply(
            "Error",
            "a request the server refuses: the evaluation stops (exit 5), nothing is stored",
        ),
        "5XX": reply(None, "a server error: retried with backoff, then the evaluation stops"),
    }
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "CloneMem memory protocol",
            "version": VERSION,
            "description": "How an evaluation harness feeds a memory system a persona's traces in time "
            "order and asks it questions (docs/memory-protocol.md).",
        },
        "paths": {
            "/v1/info": {
                "get": {
                    "operationId": "info",
                    "responses": {"200": reply("Info", "name and version"), **bad},
                }
            },
            "/v1/reset": {
                "post": {
                    "operationId": "reset",
                    "requestBody": body("ResetRequest"),
                    "responses": {"2XX": reply(None, "the persona is forgotten"), **bad},
                }
            },
            "/v1/ingest": {
                "post": {
                    "operationId": "ingest",
                    "requestBody": body("IngestRequest"),
                    "responses": {"2XX": reply(None, "the traces are stored"), **bad},
                }
            },
            "/v1/query": {
                "post": {
                    "operationId": "query",
                    "requestBody": body("QueryRequest"),
                    "responses": {"200": reply("Items", "at most k items, best first"), **bad},
                }
            },
            "/v1/stored": {
                "get": {
                    "operationId": "stored",
                    "description": "Optional. Without it (404, 405 or 501) the write diagnosis of the system is "
                    "null, not 0.",
                    "parameters": [
                        {
                            "name": "persona_id",
                            "in": "query",
                            "required": True,
                            "schema": {"type": "string"},
                        }
                    ],
                    "responses": {"200": reply("Items", "everything held for the persona"), **bad},
                }
            },
            "/v1/ready": {
                "get": {
                    "operationId": "ready",
                    "description": "Optional, since 1.2, asked only of a server whose /v1/info lists async_indexing: "
                    "polled after ingest until ready is true (bounded by evaluation.remote_ready_s), "
                    "before the next query.",
                    "parameters": [
                        {
                            "name": "persona_id",
                            "in": "query",
                            "required": True,
                            "schema": {"type": "string"},
                        }
                    ],
                    "responses": {
                        "200": reply("Ready", "whether everything ingested can be retrieved"),
                        **bad,
                    },
                }
            },
        },
        "components": {"schemas": schemas},
    }


if (
    __name__ == "__main__"
):  # python -m clonemem.schemas.memory_protocol > docs/memory-protocol.openapi.json
    import json

    print(json.dumps(openapi(), indent=2, ensure_ascii=False))
