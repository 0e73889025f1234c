"""The errors that are the user's to fix; the CLI prints them without a traceback."""

from __future__ import annotations

from clonemem.llm.types import LLMError
from clonemem.registry import RegistryError
from clonemem.release import ReleaseError, UnknownBenchmark
from clonemem.schemas.config import ConfigError
from clonemem.sqlcli import ReadOnlyViolation
from clonemem.warehouse.db import WarehouseError
from clonemem.warehouse.migrate import MigrationError

import duckdb

from clonemem.flows.evaluation import EvaluationRefused

USER_ERRORS: tuple[type[BaseException], ...] = (
    ConfigError, ReleaseError, UnknownBenchmark, ReadOnlyViolation, WarehouseError, MigrationError,
    LLMError, RegistryError, duckdb.Error, EvaluationRefused,
)
