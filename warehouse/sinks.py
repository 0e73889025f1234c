"""Where LLM call records land: the warehouse, through this process's writer."""

from __future__ import annotations

from clonemem.llm.types import CallRecord
from clonemem.warehouse.db import Warehouse


class WarehouseSink:
    """Writes each call record as it completes, so a killed run still shows what it spent."""

    def __init__(self, wh: Warehouse) -> None:
        self.wh = wh

    def record(self, rec: CallRecord) -> None:
        self.wh.upsert("llm_calls", [rec.row()])


class BufferedWarehouseSink:
    """Collects call records and writes them in batches (one row per call per transaction is slow);
    a run killed midway loses at most the last unflushed batch of its accounting, never content."""

    def __init__(self, wh: Warehouse, batch: int = 500) -> None:
        import threading

        self.wh = wh
        self.batch = batch
        self.count = 0
        self._buf: list[CallRecord] = []
        self._lock = threading.Lock()

    def record(self, rec: CallRecord) -> None:
        with self._lock:
            self._buf.append(rec)
            self.count += 1
            full = len(self._buf) >= self.batch
        if full:
            self.flush()

    def flush(self) -> None:
        with self._lock:
            rows, self._buf = [r.row() for r in self._buf], []
        if rows:
            self.wh.upsert("llm_calls", rows)
