"""Prefect flows: they orchestrate tasks and nothing else.

A flow's log carries one summary line per stage (``clonemem.tasks.reporting``); Prefect's own line
for every task run ("Task run ... Completed", hundreds per run) is held back to warnings and errors.
"""

import logging

logging.getLogger("prefect.task_runs").setLevel(logging.WARNING)
