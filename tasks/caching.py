"""Cache keys for LLM steps and tasks: inputs + source + what the inputs do not show; and the per-step cache.

A stage's output also depends on its prompt template, the model bound to its role, and, for the
offline provider, the seed and the code of the handler the stage declares (its module, the offline
helpers it imports, their lexicons). Editing a template or a handler invalidates only the tasks that
run that stage; keys never contain API keys. A memory system's results depend on its code (the
closure of its class's module, :mod:`clonemem.codehash`) and on the stages it declares in
``llm_stages``.

A key is only as good as the stages it names, so the same policies also say which stages a running
task may call (:func:`covered_stages`): the task hands that to :func:`clonemem.runtime.paid`, and a
call to any other stage (or through another role's model) is refused instead of being cached under a
key that does not cover it.
"""

from __future__ import annotations

import datetime as dt
import functools
import inspect
import logging
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from prefect.cache_policies import INPUTS, NO_CACHE, CachePolicy, CompoundCachePolicy
from prefect.context import TaskRunContext
from prefect.filesystems import LocalFileSystem, NullFileSystem
from prefect.results import ResultRecord, ResultStore, get_default_result_storage, get_result_store
from prefect.settings import get_current_settings
from prefect.transactions import CommitMode, transaction
from prefect.utilities.hashing import hash_objects

from clonemem import prompts, runtime
from clonemem.codehash import code_hash
from clonemem.ids import stable_hash
from clonemem.llm.types import LLMError, StageNotCovered
from clonemem.memory.base import declared_stages
from clonemem.prefect_env import PREFECT_VERSION
from clonemem.schemas.config import RunConfig
from clonemem.stages import STAGES, Stage
from clonemem.thirdparty import written_for

T = TypeVar("T")


def stage_key_parts(stages: Iterable[Stage], config: RunConfig) -> list[str]:
    parts = []
    for stage in stages:
        ref = config.models.ref(stage.role)
        parts += [stage.name, str(ref), prompts.template_hash(stage.template)]
        if ref.provider == "offline":
            parts += [str(config.seed), stage.offline_code_hash()]
    return parts


@dataclass
class StagePolicy(CachePolicy):
    """Adds the stages a task runs to its cache key: the stages named here, or the one in the task's
    ``stage_name`` input; ``modules`` is code the task body runs beyond its own source."""

    stage_names: tuple[str, ...] = ()
    modules: tuple[str, ...] = ()

    def stages(self, inputs: Mapping[str, Any]) -> list[Stage]:
        names = list(self.stage_names) or ([inputs["stage_name"]] if "stage_name" in inputs else [])
        return [STAGES.get(n) for n in names]

    def compute_key(
        self, task_ctx: Any, inputs: dict[str, Any], flow_parameters: dict[str, Any], **kwargs: Any
    ) -> str | None:
        parts = stage_key_parts(self.stages(inputs), runtime.current().config)
        parts += [code_hash(m) for m in self.modules]
        return stable_hash("|".join(parts))


@dataclass
class MemorySystemPolicy(CachePolicy):
    """Adds the memory system named by the task's ``system`` input: its code and its declared stages.

    Nothing is listed here: a new system (or a plugin's) is covered the moment it is registered."""

    modules: tuple[str, ...] = ()

    def stages(self, inputs: Mapping[str, Any]) -> list[Stage]:
        return list(declared_stages(inputs["system"]))

    def compute_key(
        self, task_ctx: Any, inputs: dict[str, Any], flow_parameters: dict[str, Any], **kwargs: Any
    ) -> str | None:
        from clonemem.memory import SYSTEMS

        factory = SYSTEMS.get(inputs["system"])
        parts = [inputs["system"], code_hash(factory.__module__)]
        parts += stage_key_parts(self.stages(inputs), runtime.current().config)
        parts += [code_hash(m) for m in self.modules]
        return stable_hash("|".join(parts))


def policy_stages(policy: CachePolicy | None, inputs: Mapping[str, Any]) -> dict[str, str] | None:
    """Stage name -> role of every stage ``policy`` keys on for these inputs; None for a policy that
    caches nothing (no key, so no restriction)."""
    if not isinstance(policy, CachePolicy) or policy == NO_CACHE:
        return None
    parts = policy.policies if isinstance(policy, CompoundCachePolicy) else [policy]
    return {
        s.name: s.role
        for p in parts
        if isinstance(p, (StagePolicy, MemorySystemPolicy))
        for s in p.stages(inputs)
    }


def covered_stages() -> dict[str, str] | None:
    """The stages the running task's cache key covers (see :func:`policy_stages`), for
    :func:`clonemem.runtime.paid`; None outside a Prefect task (nothing is cached there)."""
    ctx = TaskRunContext.get()
    if ctx is None:
        return None
    return policy_stages(ctx.task.cache_policy, ctx.parameters or {})


# -- LLM steps cached without a task run each ----------------------------------------------------------
#
# A persona takes hundreds of LLM steps; one Prefect task run per step made the server write hundreds
# of rows (and their events and states) per persona on every run, cached or not. Steps are cached here
# instead, each in a Prefect transaction on the run's result store: the same key logic as a task with
# ``INPUTS + TASK_SOURCE + policy`` and the same result records, in the same storage (a killed run
# resumes from them, scale-out workers sharing ``$PREFECT_HOME/storage`` share them), and no API call.

_log = logging.getLogger("clonemem.steps")


@functools.cache
def _source_hash(fn: Callable[..., Any]) -> str:
    return hash_objects(inspect.getsource(fn), raise_on_failure=True) or ""


def step_key(body: Callable[..., Any], inputs: dict[str, Any], policy: CachePolicy) -> str:
    """The cache key of running ``body(**inputs)``: its inputs, its source and what ``policy`` adds (for an
    LLM step, :class:`StagePolicy`: the stage's template, model binding, seed and offline handler code)."""
    parts = (
        INPUTS.compute_key(None, inputs, {}),  # type: ignore[arg-type]  # no task context outside a task run
        _source_hash(body),
        policy.compute_key(None, inputs, {}),  # type: ignore[arg-type]  # no task context outside a task run
    )
    return stable_hash("|".join(p or "" for p in parts))


def step_store() -> ResultStore:
    """Where step results persist: the current run's result store, with the storage a task would get
    (the run's, else Prefect's default: ``$PREFECT_HOME/storage`` unless a default block is set).

    The step cache uses Prefect's result store and transactions below the task API (a store copied with
    other storage, a record read from a transaction): written for Prefect 3.8.8, refused with another."""
    written_for("prefect", PREFECT_VERSION, "the step cache (clonemem.tasks.caching)")
    store = get_result_store()
    update: dict[str, Any] = {"cache_result_in_memory": False}  # read once per run: no copy kept
    storage = store.result_storage
    if storage is None:
        storage = get_default_result_storage(_sync=True)  # type: ignore[call-arg,assignment]  # Prefect's sync/async dispatch keyword: with it, the storage itself, not a coroutine
    if type(storage) is LocalFileSystem and storage.basepath:
        storage = StepFiles(basepath=storage.basepath)
    update["result_storage"] = storage
    if isinstance(store.metadata_storage, NullFileSystem):
        update["metadata_storage"] = None
    return store.model_copy(update=update)


_FILE_NAME = re.compile(r"[A-Za-z0-9_-]+")


@functools.lru_cache(maxsize=16)
def _folder(basepath: str) -> Path:
    return Path(basepath).expanduser().resolve()


class StepFiles(LocalFileSystem):
    """Prefect's local result storage, finding a step's file without resolving paths again and again.

    ``LocalFileSystem`` resolves its folder and the file's path (two walks of every path component) on
    each read, write and existence check, and its result store asks four times per cached step: 0.1 ms
    each, the most of reading a cached step. Here the folder is resolved once and a key that is a
    plain file name (a cache key is a hash) is joined to it; anything else is resolved as Prefect does.
    A block type of its own (``_block_type_name``): a subclass would otherwise take the name, and the
    place in Prefect's registry, of the class it extends."""

    _block_type_name = "CloneMem step files"

    def _resolve_path(self, path: str) -> Path:
        if path and self.basepath and _FILE_NAME.fullmatch(path):
            return _folder(str(self.basepath)) / path
        return super()._resolve_path(path)


def is_transient(exc: BaseException) -> bool:
    """Whether a failed task may succeed when Prefect runs it again as a whole: not when an LLM call failed
    (a call's retries are its wrapper's alone, one budget per call: trying the task again would multiply
    them, :mod:`clonemem.llm.model`), not for a programming error."""
    return not isinstance(exc, (LLMError, StageNotCovered, TypeError))


def transient_only(task: object, task_run: object, state: object) -> bool:
    """A task's ``retry_condition_fn``: retry transient failures only (see :func:`is_transient`)."""
    try:
        state.result()  # type: ignore[attr-defined]  # Prefect types the state as object here
    except Exception as exc:
        return is_transient(exc)
    return False


def cached_step(key: str, body: Callable[[], T], store: ResultStore) -> tuple[T, bool]:
    """``body()``'s result under ``key`` and whether it came from the store: read when committed
    before, else computed and committed at once (eagerly: a run killed later keeps it). A failure commits
    nothing and is raised: the step is not tried again here, its LLM calls were retried by their wrapper
    within their budget (a step retry would multiply the attempts)."""
    # PREFECT_TASKS_REFRESH_CACHE runs (and stores again) every step, as it does every task: the cost
    # estimate's dry run counts every call that way
    if not get_current_settings().tasks.refresh_cache:
        record = _committed(store, key)
        if record is not None:
            return record.result, True
    # Known not to be committed (or to be refreshed): ``overwrite`` spares the transaction asking the
    # store again (Prefect's check reads and decodes the whole record, as the read above did).
    with transaction(
        key=key, store=store, commit_mode=CommitMode.EAGER, overwrite=True, logger=_log
    ) as txn:
        value = body()
        txn.stage(value)
    return value, False


def _committed(store: ResultStore, key: str) -> ResultRecord[Any] | None:
    """The record committed under ``key``, read once; None when there is none, it expired or it cannot be
    read (then the step runs and writes it again), as Prefect's own check (``ResultStore.exists``) says.
    That check reads and decodes the record only to answer yes, and a transaction's read then decodes
    it again: a cached step read its record twice."""
    try:
        record = store.read(key)
    except (
        Exception
    ):  # missing, partly written or unreadable: not committed, as Prefect's check has it
        return None
    expiration = record.metadata.expiration
    if expiration is not None and expiration <= dt.datetime.now(dt.UTC):
        return None
    return record


# -- replies of remote memory systems, kept for a resumed run ------------------------------------------
#
# A remote system's retrievals are never cached across evaluations (the service behind a URL may change
# without a word), but an interrupted evaluation's successor should not ask it again what it already
# answered. Its replies are kept as steps under a resume token: the same token until an evaluation of
# the benchmark finishes, a new one after.


def resume_token(scope: str, renew: bool = False) -> str:
    """The token of ``scope``'s unfinished evaluation (made when there is none); ``renew``: a fresh one,
    so the next evaluation asks every remote system again."""
    import uuid

    store = step_store()
    key = f"remote-resume-{stable_hash(scope, 32)}"
    if not renew and store.exists(key):
        record = store.read(key)
        if isinstance(record.result, str):
            return record.result
    token = uuid.uuid4().hex
    store.write(token, key=key)
    return token


def reply_memo(token: str) -> Callable[[str, Callable[[], Any]], Any]:
    """Remote replies kept under ``token``: a reply got before is read, any other asked and kept at once
    (a run killed later keeps it). Never tried again here: the remote client owns its retries."""
    store = step_store()

    def memo(key: str, ask: Callable[[], Any]) -> Any:
        value, _ = cached_step(stable_hash(f"remote-reply|{token}|{key}", 32), ask, store)
        return value

    return memo
