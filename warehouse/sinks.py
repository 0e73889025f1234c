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
