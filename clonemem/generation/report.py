"""What a generation run did, tallied as personas finish: counts, failures, drops, calls made."""

from __future__ import annotations

from dataclasses import dataclass, field

from clonemem.generation.assemble import Assembly
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
        self.failures += [StageFailure(persona=dag.key, stage=f.stage, item=f.item, error=f.error) for f in dag.failures]
        self.llm_calls += sum(1 for c in dag.calls if c.run_id == self.run_id)  # not those a cached result carries
        self.steps += len(dag.step_calls)
        self.cached_steps += sum(1 for calls in dag.step_calls if calls and all(c.run_id != self.run_id for c in calls))
        if assembly is None or landed is None:
            return
        self.dropped += [f"{dag.key}: {d}" for d in assembly.dropped]
        t = assembly.rows.tables
        self.traces += len(t.get("traces", []))
        self.evidence += len(t.get("evidence", []))
        self.detailed_events += len(t.get("detailed_events", []))
        if landed:
            self.landed += 1
        else:
            self.unchanged += 1

    def failure_records(self) -> list[FailureRecord]:
        return [FailureRecord(f.persona, f.stage, f.item, f.error) for f in self.failures]

    def result(self, seconds: float) -> GenerationResult:
        return GenerationResult(
            benchmark_id=self.benchmark_id, name=self.name, personas=self.personas, landed=self.landed,
            unchanged=self.unchanged, traces=self.traces, evidence=self.evidence, detailed_events=self.detailed_events,
            llm_calls=self.llm_calls, failures=tuple(self.failures), dropped=tuple(self.dropped),
            seconds=round(seconds, 2), run_id=self.run_id, steps=self.steps, cached_steps=self.cached_steps)
