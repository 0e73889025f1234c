"""What a generation run did, tallied as personas finish (in process) or as their bundles are landed
(scale-out): counts, failures, drops, calls made. Both build the same summary through one tally."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from clonemem.generation.assemble import Assembly
from clonemem.generation.bundle import PersonaBundle
from clonemem.generation.dag import PersonaDag
from clonemem.schemas.results import GenerationResult, StageFailure
from clonemem.warehouse.runs import FailureRecord


@dataclass
class GenerationTally:
    benchmark_id: str
    name: str
    personas: int
    run_id: str
    landed: int = 0
    unchanged: int = 0
    traces: int = 0
    evidence: int = 0
    detailed_events: int = 0
    llm_calls: int = 0
    steps: int = 0
    cached_steps: int = 0
    failures: list[StageFailure] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)

    def add(self, dag: PersonaDag, assembly: Assembly | None, landed: bool | None) -> None:
        """A finished persona: ``landed`` None when nothing coherent was generated (stage I failed)."""
        self.steps += len(dag.step_calls)
        self.cached_steps += sum(
            1 for calls in dag.step_calls if calls and all(c.run_id != self.run_id for c in calls)
        )
        self._persona(
            dag.key,
            [
                StageFailure(persona=dag.key, stage=f.stage, item=f.item, error=f.error)
                for f in dag.failures
            ],
            sum(
                1 for c in dag.calls if c.run_id == self.run_id
            ),  # not those a cached result carries
            None if assembly is None or landed is None else assembly.rows.tables,
            assembly.dropped if assembly else (),
            bool(landed),
        )

    def add_bundle(self, bundle: PersonaBundle, landed: bool) -> None:
        """A persona generated on a worker, read from its bundle: ``landed`` False when its content was
        already in the warehouse (a bundle whose stage I failed has no persona and counts neither way)."""
        complete = bundle.persona_id is not None
        self._persona(
            bundle.persona_key,
            bundle.failures,
            bundle.new_calls(),
            bundle.tables if complete else None,
            bundle.dropped,
            landed,
        )

    def _persona(
        self,
        key: str | None,
        failures: Iterable[StageFailure],
        new_calls: int,
        tables: Mapping[str, Sequence[object]] | None,
        dropped: Iterable[str],
        landed: bool,
    ) -> None:
        """One persona's failures and calls; its rows, drops and landing only when it has rows (``tables``)."""
        self.failures += failures
        self.llm_calls += new_calls
        if tables is None:
            return
        self.dropped += [f"{key}: {d}" for d in dropped]
        self.traces += len(tables.get("traces", []))
        self.evidence += len(tables.get("evidence", []))
        self.detailed_events += len(tables.get("detailed_events", []))
        if landed:
            self.landed += 1
        else:
            self.unchanged += 1

    def failure_records(self) -> list[FailureRecord]:
        return [FailureRecord(f.persona, f.stage, f.item, f.error) for f in self.failures]

    def result(self, seconds: float) -> GenerationResult:
        return GenerationResult(
            benchmark_id=self.benchmark_id,
            name=self.name,
            personas=self.personas,
            landed=self.landed,
            unchanged=self.unchanged,
            traces=self.traces,
            evidence=self.evidence,
            detailed_events=self.detailed_events,
            llm_calls=self.llm_calls,
            failures=tuple(self.failures),
            dropped=tuple(self.dropped),
            seconds=round(seconds, 2),
            run_id=self.run_id,
            steps=self.steps,
            cached_steps=self.cached_steps,
        )
