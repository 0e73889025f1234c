"""A memory server in the Python standard library only: the memory protocol, version 1.2
(docs/memory-protocol.md), with a word-overlap retriever. It imports nothing of CloneMem: it shows
what a memory system written elsewhere has to implement to be scored with

    python server.py --port 8765 &
    clonemem evaluate BENCHMARK --systems http://127.0.0.1:8765

It keeps what it is sent and nothing else; it never looks at dates, because the harness sends only
traces dated at or before the next question. ``--log FILE`` appends one JSON line per query with the
number of traces held and the latest one's date, so that can be checked.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

PROTOCOL = "1.2"
WORD = re.compile(r"\w+", re.UNICODE)
STOP = frozenset(
    "a an and are at be did do does for from had has have how i in is it me my of on or "
    "she he that the their they this to was were what when where which who why with you".split()
)


def words(text: str) -> set[str]:
    """Lower-cased words, stop words dropped; CJK text (no spaces) contributes its characters."""
    out = set()
    for w in WORD.findall(text.lower()):
        if w in STOP:
            continue
        out.update(w if any("\u4e00" <= ch <= "\u9fff" for ch in w) else (w,))
    return out


class Memory:
    """Every persona's traces, as sent."""

    def __init__(self, log: str | None) -> None:
        self.personas: dict[str, list[dict]] = {}
        self.lock = threading.Lock()
        self.log = log

    def reset(self, body: dict) -> None:
        with self.lock:
            self.personas[body["persona_id"]] = []

    def ingest(self, body: dict) -> None:
        # content already holds what the source inlines (a speaker, a photo's caption); since 1.2 an
        # attachment's caption also comes apart: its words count when content lacks them
        traces = [
            {
                "trace_id": t["trace_id"],
                "event_date": t["event_date"],
                "content": t["content"],
                "words": words(
                    " ".join(
                        [t["content"], *(a.get("caption") or "" for a in t.get("attachments", []))]
                    )
                ),
            }
            for t in body["traces"]
        ]
        with self.lock:
            held = self.personas.setdefault(body["persona_id"], [])
            known = {t["trace_id"] for t in held}
            held.extend(
                t for t in traces if t["trace_id"] not in known
            )  # a retried batch is kept once

    def query(self, body: dict) -> dict:
        with self.lock:
            held = list(self.personas.get(body["persona_id"], []))
        asked = words(body["question"])
        scored = []
        for n, t in enumerate(held):
            overlap = len(asked & t["words"])
            if overlap:
                scored.append((overlap / math.sqrt(len(t["words"])), -n, t))
        scored.sort(key=lambda s: (s[0], s[1]), reverse=True)
        if self.log:
            entry = {
                "persona_id": body["persona_id"],
                "question_id": body["question_id"],
                "question_time": body["question_time"],
                "held": len(held),
                "latest": max((t["event_date"] for t in held), default=None),
            }
            with self.lock, open(self.log, "a", encoding="utf-8") as f:
                f.write(json.dumps(entry) + "\n")
        return {
            "format_version": PROTOCOL,
            "items": [
                {"text": t["content"], "trace_ids": [t["trace_id"]], "score": round(score, 6)}
                for score, _, t in scored[: int(body["k"])]
            ],
        }

    def stored(self, persona_id: str) -> dict:
        with self.lock:
            held = list(self.personas.get(persona_id, []))
        return {
            "format_version": PROTOCOL,
            "items": [{"text": t["content"], "trace_ids": [t["trace_id"]]} for t in held],
        }


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive
    # the headers and the body of a reply leave in two writes: without TCP_NODELAY the body waits for the
    # client's ACK of the headers, which a client that delays its ACKs sends 40 ms later
    disable_nagle_algorithm = True
    memory: Memory

    def log_message(self, format: str, *args: object) -> None:
        pass

    def reply(self, status: int, body: dict | None = None) -> None:
        data = json.dumps(body).encode("utf-8") if body is not None else b""
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        if url.path == "/v1/info":
            self.reply(
                200,
                {
                    "format_version": PROTOCOL,
                    "name": "stdlib-overlap",
                    "version": "1.1",
                    "protocol": PROTOCOL,
                    "features": ["stored", "attachments"],
                },
            )
        elif url.path == "/v1/stored":
            persona = parse_qs(url.query).get("persona_id", [""])[0]
            self.reply(200, self.memory.stored(persona))
        else:
            self.reply(404, {"error": f"no such call: GET {url.path}"})

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
        path = urlsplit(self.path).path
        version = str(body.get("format_version") or "1.0")
        if (
            version.split(".")[0] != PROTOCOL.split(".")[0]
        ):  # a later minor version only adds fields
            self.reply(
                400, {"error": f"format_version {version} is not supported: this server reads 1.x"}
            )
            return
        try:
            if path == "/v1/reset":
                self.memory.reset(body)
                self.reply(204)
            elif path == "/v1/ingest":
                self.memory.ingest(body)
                self.reply(204)
            elif path == "/v1/query":
                self.reply(200, self.memory.query(body))
            else:
                self.reply(404, {"error": f"no such call: POST {path}"})
        except KeyError as exc:
            self.reply(400, {"error": f"field {exc.args[0]} is missing"})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8765, help="port on 127.0.0.1 (0: a free one)")
    parser.add_argument("--log", help="append one JSON line per query: what the persona held")
    args = parser.parse_args()
    handler = type("BoundHandler", (Handler,), {"memory": Memory(args.log)})
    server = ThreadingHTTPServer(("127.0.0.1", args.port), handler)
    server.daemon_threads = True
    print(f"serving stdlib-overlap at http://127.0.0.1:{server.server_address[1]}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
