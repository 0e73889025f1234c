"""Driving persona graphs: one loop on the calling thread hands ready stages to an executor and
feeds completions back, so the graph's state is only ever touched by one thread."""

from __future__ import annotations

import datetime as dt
import itertools
import queue
import random
import tomllib
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from clonemem import progress
from clonemem.generation.dag import CHAIN_STAGES, PersonaDag
from clonemem.generation.stages import Stage
from clonemem.ids import stable_int
from clonemem.llm.types import Paid
from clonemem.runtime import Runtime, step_pool
from clonemem.schemas.config import ConfigError, RunConfig
from clonemem.schemas.generation import BigFive, PersonaSpec, SeedConcept
from clonemem.warehouse.runs import stops_run

StartCall = Callable[[Stage, BaseModel, str], Any]  # returns a future with add_done_callback/result
Step = Callable[
    [Stage, BaseModel, str], Any
]  # runs one step (stage, input, item name) to its result


def drive(
    dags: list[PersonaDag], start_call: StartCall, on_persona_done: Callable[[PersonaDag], None]
) -> None:
    # Completions on the sequential chain are handled first: every moment the chain waits in this
    # queue behind fan-out work lengthens the whole run.
    done: queue.PriorityQueue = queue.PriorityQueue()
    order = itertools.count()
    with ExitStack() as shown:
        # each persona is an activity: its LLM steps done of those known so far (the graph grows as it goes)
        steps = {
            id(d): shown.enter_context(
                progress.doing(f"persona {d.key}", "generating", 0, "LLM steps")
            )
            for d in dags
        }
        _drive(dags, start_call, on_persona_done, done, order, steps)


def _drive(
    dags: list[PersonaDag],
    start_call: StartCall,
    on_persona_done: Callable[[PersonaDag], None],
    done: queue.PriorityQueue,
    order: Iterator[int],
    steps: dict[int, progress.Activity],
) -> None:
    def submit(stage: Stage, inp: BaseModel, item: str, on_done: Any, dag: PersonaDag) -> None:
        steps[id(dag)].grow()
        fut = start_call(stage, inp, item)
        rank = 0 if stage.name in CHAIN_STAGES else 1
        fut.add_done_callback(
            lambda f: done.put((rank, next(order), (f, stage, item, on_done, dag)))
        )

    def finished(dag: PersonaDag) -> None:
        steps[id(dag)].finish()
        on_persona_done(dag)

    for dag in dags:
        dag.start(submit, finished)
    while any(d._pending for d in dags):
        fut, stage, item, on_done, dag = done.get()[2]
        steps[id(dag)].advance()
        try:
            result = fut.result()
        except Exception as exc:  # recorded on the persona as a failed item; the rest continues
            dag.step_calls.append(tuple(getattr(exc, "calls", ())))  # spent all the same
            if stops_run(exc):
                # the run stops here: finished personas are landed, finished steps cached; a refused
                # key or model would fail every further step alike
                raise
            dag.failed(stage, item, exc, on_done)
            continue
        if isinstance(result, Paid):  # a step's output with the calls that produced it
            dag.step_calls.append(result.calls)
            result = result.value
        dag.completed(on_done, result)


def run_pooled(
    dags: list[PersonaDag], step: Step, on_persona_done: Callable[[PersonaDag], None], workers: int
) -> None:
    """Drive graphs on a pool of ``workers`` threads, each step running ``step`` in a copy of the caller's
    context (so a Prefect flow's run context and settings reach the steps, as they reach its tasks)."""
    with step_pool(workers) as pool:  # a stopped run starts no queued step
        drive(dags, lambda stage, inp, item: pool.submit(step, stage, inp, item), on_persona_done)


def run_inline(
    dags: list[PersonaDag],
    runtime: Runtime,
    on_persona_done: Callable[[PersonaDag], None],
    workers: int = 32,
) -> None:
    """Run graphs without Prefect (tests, debugging): a plain thread pool, no caching."""
    run_pooled(
        dags,
        lambda stage, inp, item: stage.run(runtime.model(stage.role), inp),
        on_persona_done,
        workers,
    )


def persona_specs(config: RunConfig) -> list[PersonaSpec]:
    """Big Five configurations and timelines, derived from the run seed (fixed inputs, as in A.2)."""
    gen = config.generation
    end = gen.start_date + dt.timedelta(days=round(365 * gen.span_years))
    specs = []
    for i in range(gen.personas):
        rng = random.Random(stable_int(config.seed, "persona", i))
        traits = {t: round(rng.uniform(0.1, 0.9), 2) for t in BigFive.model_fields}
        specs.append(
            PersonaSpec(
                index=i,
                big_five=BigFive(**traits),
                language=gen.language,
                timeline_start=gen.start_date,
                timeline_end=end,
            )
        )
    return specs


def seed_pool(config: RunConfig) -> list[SeedConcept]:
    """The curated event-seed pool: the config's file, else the packaged one."""
    path = config.generation.seed_pool
    if path is None:
        text = (resources.files("clonemem") / "data" / "event_seeds.toml").read_text("utf-8")
        source = "event_seeds.toml"
    else:
        try:
            text = Path(path).read_text("utf-8")
        except OSError as exc:
            raise ConfigError(f"generation.seed_pool: cannot read {path}: {exc.strerror}") from None
        source = str(path)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{source}: not valid TOML: {exc}") from None
    lang = config.generation.language
    pool = []
    for i, entry in enumerate(data.get("seed", [])):
        try:
            label, desc = entry["label"], entry["description"]
            pool.append(
                SeedConcept(
                    concept=entry["concept"],
                    label=label[lang] if isinstance(label, dict) else label,
                    description=desc[lang] if isinstance(desc, dict) else desc,
                )
            )
        except (KeyError, TypeError) as exc:
            raise ConfigError(
                f"{source}: seed[{i}]: missing {exc} (each seed needs concept, label, description)"
            ) from None
    if not pool:
        raise ConfigError(f"{source}: no [[seed]] entries")
    return pool


def new_dags(config: RunConfig) -> list[PersonaDag]:
    pool = seed_pool(config)
    return [
        PersonaDag(spec=spec, gen=config.generation, pool=pool) for spec in persona_specs(config)
    ]
