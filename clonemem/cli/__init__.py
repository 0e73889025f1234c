"""The `clonemem` command line: commands parse arguments, call one service, print.

- `app.py`: the Typer app, the global options (`State`) and the warehouse hold; it configures Prefect
  and the allocators before anything else loads, so it is imported first.
- `exit.py`: how a command ends: one line per failure and its exit code, the console script `main`.
- `render.py`: the text the commands print; `options.py`: reading option values.
- One module per command group: `imports.py`, `generation.py`, `evaluation.py`, `gym.py`,
  `warehouse.py`, `serve.py`, `leaderboard.py`.

Imports inside command functions are kept for what `clonemem --help` and the light commands
(`systems`, `sql`, `benchmarks`) need not load, measured with `python -X importtime` on this machine:
Prefect and every module importing it (`clonemem.flows.*`, `clonemem.expectations.*`, `clonemem.cost`;
about 2.4 s), DuckDB and polars behind `clonemem.warehouse`, `clonemem.sqlcli`, `clonemem.importers`,
`clonemem.exporters`, `clonemem.evaluation.*` and `clonemem.memory.*` (0.3–0.8 s each), and Streamlit
behind `clonemem.dashboard`. Everything else is imported at the top of its module.
"""

from __future__ import annotations

from clonemem.cli.app import app  # first: sets Prefect's settings and the allocators (see app.py)

# the command groups, in the order `clonemem --help` lists them
# isort: off
from clonemem.cli import imports  # noqa: F401
from clonemem.cli import generation  # noqa: F401
from clonemem.cli import evaluation  # noqa: F401
from clonemem.cli import gym  # noqa: F401
from clonemem.cli import serve  # noqa: F401
from clonemem.cli import warehouse  # noqa: F401
from clonemem.cli import leaderboard  # noqa: F401

# isort: on
from clonemem.cli.exit import leave, main

__all__ = ["app", "leave", "main"]
