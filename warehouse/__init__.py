"""DuckDB warehouse: schema migrations, the single writer, read-only readers."""

from clonemem.warehouse.db import Warehouse, WarehouseError

__all__ = ["Warehouse", "WarehouseError"]
