"""The dependency graph of one persona's generation (stages I–III), driven by completions.

Only the phase chain is sequential (Algorithm 1: each phase sees the snapshot the previous one left,
across major events too); everything whose inputs are ready is handed to ``submit`` at once, so
detailed events, evidence and traces of different phases fan out while the chain goes on.
The graph is executor-agnostic: the Prefect flow and the in-process executor both drive it.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

from pydantic import BaseModel

from clonemem.generation import stages as S
from clonemem.llm.types import CallRecord
from clonemem.schemas import generation as g
from clonemem.schemas.config import GenerationConfig

OnDone = Callable[[BaseModel], None]

# Stages on a persona's critical path: stage I and the phase chain.
CHAIN_STAGES = frozenset(
    {
        S.PERSONA.name,
        S.RELATIONS.name,
        S.SEEDS.name,
        S.ARCS.name,
        S.PRIVACY.name,
        S.MAJOR_EVENTS.name,
        S.INITIAL_SNAPSHOT.name,
        S.PHASE.name,
        S.SNAPSHOT_UPDATE.name,
    }
)
Submit = Callable[[S.Stage, BaseModel, str, OnDone, "PersonaDag"], None]


@dataclass(frozen=True)
class Failure:
    stage: str
    item: str
    error: str


@dataclass
class PersonaDag:
    spec: g.PersonaSpec
    gen: GenerationConfig
    pool: list[g.SeedConcept]
    profile: g.Profile | None = None
    relations: list[g.Relation] | None = None
    seeds: list[g.ChosenSeed] | None = None
    arcs: list[g.LifeArc] = field(default_factory=list)
    privacy: list[g.PrivacyMatter] = field(default_factory=list)  # the persona's sensitive matters
    events: list[g.MajorEvent] = field(default_factory=list)
    snapshots: list[g.Snapshot] = field(default_factory=list)  # the carried chain, H0 first
    phases: dict[tuple[int, int], tuple[g.Phase, int, int]] = field(
        default_factory=dict
    )  # -> (phase, before, after)
    detailed: dict[tuple[int, int], list[g.DetailedEvent]] = field(default_factory=dict)
    plans: dict[tuple[int, int, int], list[g.TracePlan]] = field(default_factory=dict)
    noise_plans: dict[tuple[int, int], list[g.TracePlan]] = field(default_factory=dict)
    contents: dict[tuple, str] = field(default_factory=dict)  # (e, k, i, t) or (e, k, "noise", t)
    failures: list[Failure] = field(default_factory=list)
    step_calls: list[tuple[CallRecord, ...]] = field(
        default_factory=list
    )  # per finished step: what it spent

    @property
    def calls(self) -> list[CallRecord]:
        """What the persona's steps spent (landed with it)."""
        return [c for calls in self.step_calls for c in calls]

    _submit: Submit | None = None
    _pending: int = 0
    _on_finished: Callable[[PersonaDag], None] | None = None

    # -- driving ---------------------------------------------------------------------------

    def start(self, submit: Submit, on_finished: Callable[[PersonaDag], None]) -> None:
        self._submit, self._on_finished = submit, on_finished
        self._go(S.PERSONA, self.spec, "persona", self._on_profile)

    def _go(self, stage: S.Stage, inp: BaseModel, item: str, on_done: OnDone) -> None:
        assert self._submit is not None
        self._pending += 1
        self._submit(stage, inp, item, on_done, self)

    def completed(self, on_done: OnDone, result: BaseModel) -> None:
        """Called by the executor, on the driving thread, when a submitted stage succeeded."""
        on_done(result)
        self._settle()

    def failed(self, stage: S.Stage, item: str, error: BaseException, on_done: OnDone) -> None:
        """Called by the executor when a stage item failed (its calls' retries spent)."""
        self.failures.append(Failure(stage.name, item, f"{type(error).__name__}: {error}"))
        recover = getattr(on_done, "on_failure", None)
        if recover is not None:
            recover()
        self._settle()

    def _settle(self) -> None:
        self._pending -= 1
        if self._pending == 0 and self._on_finished is not None:
            self._on_finished(self)

    @property
    def key(self) -> str:
        return f"p{self.spec.index + 1:02d}"

    @property
    def language(self) -> str:
        return self.spec.language

    # -- stage I ---------------------------------------------------------------------------

    def _on_profile(self, profile: BaseModel) -> None:
        assert isinstance(profile, g.Profile)
        self.profile = profile
        self._go(
            S.RELATIONS,
            g.RelationsInput(profile=profile, language=self.spec.language),
            "relations",
            self._on_relations,
        )
        self._go(
            S.SEEDS,
            g.SeedsInput(
                profile=profile,
                pool=self.pool,
                max_from_pool=4,
                max_added=2,
                language=self.spec.language,
            ),
            "seeds",
            self._on_seeds,
        )

    def _on_relations(self, out: BaseModel) -> None:
        assert isinstance(out, g.RelationsOut)
        self.relations = list(out.relations)
        self._maybe_arcs()

    def _on_seeds(self, out: BaseModel) -> None:
        assert isinstance(out, g.SeedsOut)
        self.seeds = list(out.seeds)
        self._maybe_arcs()

    def _maybe_arcs(self) -> None:
        if self.relations is None or self.seeds is None or self.profile is None:
            return
        self._go(
            S.ARCS,
            g.ArcsInput(
                profile=self.profile,
                relations=self.relations,
                seeds=self.seeds,
                arcs_per_dimension=self.gen.arcs_per_dimension,
                language=self.language,
            ),
            "arcs",
            self._on_arcs,
        )

    def _on_arcs(self, out: BaseModel) -> None:
        assert isinstance(out, g.ArcsOut) and self.profile and self.relations is not None
        self.arcs = list(out.arcs)

        # the boundaries come before the timeline: every trace plan is written within them
        def on_privacy(privacy: BaseModel) -> None:
            assert isinstance(privacy, g.PrivacyOut)
            keys = {a.key for a in self.arcs}
            self.privacy = [m for m in privacy.matters if m.arc_key in keys]
            self._major_events()

        on_privacy.on_failure = self._major_events  # type: ignore[attr-defined]  # a callback attribute set on the future
        self._go(
            S.PRIVACY,
            g.PrivacyInput(
                profile=self.profile,
                relations=self.relations,
                arcs=self.arcs,
                language=self.language,
            ),
            "privacy",
            on_privacy,
        )

    def _major_events(self) -> None:
        assert self.profile and self.relations is not None
        self._go(
            S.MAJOR_EVENTS,
            g.MajorEventsInput(
                profile=self.profile,
                relations=self.relations,
                arcs=self.arcs,
                timeline_start=self.spec.timeline_start,
                timeline_end=self.spec.timeline_end,
                count=self.gen.major_events,
                language=self.language,
            ),
            "major_events",
            self._on_events,
        )

    def _on_events(self, out: BaseModel) -> None:
        assert isinstance(out, g.MajorEventsOut)
        self.events = sorted(out.events, key=lambda e: e.date)
        self._go(
            S.INITIAL_SNAPSHOT,
            g.InitialSnapshotInput(
                persona=self.brief,
                arcs=self.arc_briefs(0),
                first_event=self.events[0],
                language=self.language,
            ),
            "snapshot0",
            self._on_initial_snapshot,
        )

    def _on_initial_snapshot(self, snap: BaseModel) -> None:
        assert isinstance(snap, g.Snapshot)
        self.snapshots.append(snap)
        self._next_phase(0, 0, None)

    # -- stage II: the carried chain ---------------------------------------------------------

    def _next_phase(self, e: int, k: int, previous: g.PhaseBrief | None) -> None:
        if k >= self.gen.phases_per_event:
            e, k = e + 1, 0
        if e >= len(self.events):
            return
        start, end = self.phase_dates(e, k)
        inp = g.PhaseInput(
            persona=self.brief,
            relations=self.relations or [],
            event=self.events[e],
            event_index=e,
            arcs=self.arc_briefs(e),
            snapshot=self.snapshots[-1],
            phase_index=k,
            phase_count=self.gen.phases_per_event,
            start_date=start,
            end_date=end,
            previous_phase=previous,
            language=self.language,
        )

        def on_phase(phase: BaseModel) -> None:
            assert isinstance(phase, g.Phase)
            self._update_snapshot(e, k, phase)

        on_phase.on_failure = lambda: self._next_phase(e, k + 1, previous)  # type: ignore[attr-defined]  # a callback attribute set on the future
        self._go(S.PHASE, inp, f"E{e + 1}P{k + 1}", on_phase)

    def _update_snapshot(self, e: int, k: int, phase: g.Phase) -> None:
        before = len(self.snapshots) - 1
        inp = g.SnapshotUpdateInput(
            persona=self.brief,
            arcs=self.arc_briefs(e),
            snapshot=self.snapshots[before],
            phase=phase,
            language=self.language,
        )

        def on_snapshot(snap: BaseModel) -> None:
            assert isinstance(snap, g.Snapshot)
            self.snapshots.append(snap)
            self.phases[(e, k)] = (phase, before, before + 1)
            # the chain first: it is the critical path
            self._next_phase(
                e,
                k + 1,
                g.PhaseBrief(title=phase.title, description=phase.description, tone=phase.tone),
            )
            self._micro(e, k, phase, before)

        # without its update the phase is dropped and the chain carries the snapshot it had
        on_snapshot.on_failure = lambda: self._next_phase(e, k + 1, None)  # type: ignore[attr-defined]  # a callback attribute set on the future
        self._go(S.SNAPSHOT_UPDATE, inp, f"E{e + 1}P{k + 1}", on_snapshot)

    # -- stage III: fan-out ------------------------------------------------------------------

    def _micro(self, e: int, k: int, phase: g.Phase, before: int) -> None:
        key = f"E{e + 1}P{k + 1}"
        mix = self.gen.media_mix
        self._go(
            S.DETAILED_EVENTS,
            g.DetailedEventsInput(
                persona=self.brief,
                relations=self.relations or [],
                arcs=self.arc_briefs(e),
                event_title=self.events[e].title,
                phase=phase,
                phase_key=key,
                phase_index=k,
                phase_count=self.gen.phases_per_event,
                primary_arc=self.events[e].primary_arc,
                snapshot_before=self.snapshots[before],
                snapshot_after=self.snapshots[before + 1],
                count=self.gen.events_per_phase,
                evidence_per_event=self.gen.evidence_per_event,
                language=self.language,
            ),
            key,
            lambda out: self._on_detailed(e, k, before, out),
        )
        if self.gen.noise_traces_per_phase:
            self._go(
                S.NOISE_PLANS,
                g.NoisePlansInput(
                    persona=self.brief,
                    relations=self.relations or [],
                    phase=phase,
                    phase_key=key,
                    media_mix=mix,
                    count=self.gen.noise_traces_per_phase,
                    language=self.language,
                ),
                key,
                lambda out: self._on_noise_plans(e, k, phase, before, out),
            )

    def _on_detailed(self, e: int, k: int, before: int, out: BaseModel) -> None:
        assert isinstance(out, g.DetailedEventsOut)
        self.detailed[(e, k)] = list(out.events)
        for i, event in enumerate(out.events):
            self._go(
                S.TRACE_PLANS,
                g.TracePlansInput(
                    persona=self.brief,
                    relations=self.relations or [],
                    event=event,
                    event_key=f"E{e + 1}P{k + 1}D{i + 1}",
                    snapshot_before=self.snapshots[before],
                    snapshot_after=self.snapshots[before + 1],
                    media_mix=self.gen.media_mix,
                    count=self.gen.traces_per_event,
                    language=self.language,
                    boundaries=self.privacy,
                ),
                f"E{e + 1}P{k + 1}D{i + 1}",
                partial(self._on_plans, e, k, i, event, before),
            )

    def _on_plans(
        self, e: int, k: int, i: int, event: g.DetailedEvent, before: int, out: BaseModel
    ) -> None:
        assert isinstance(out, g.TracePlansOut)
        plans = [
            p for p in out.traces if all(0 <= j < len(event.evidence) for j in p.evidence_indices)
        ]
        self.plans[(e, k, i)] = plans
        for t, plan in enumerate(plans):
            carried = [event.evidence[j] for j in plan.evidence_indices]
            key = f"E{e + 1}P{k + 1}D{i + 1}T{t + 1}"
            self._write(
                key,
                (e, k, i, t),
                plan,
                event.title,
                event.description,
                event.place,
                event.people,
                carried,
                self.snapshots[before + 1],
            )

    def _on_noise_plans(self, e: int, k: int, phase: g.Phase, before: int, out: BaseModel) -> None:
        assert isinstance(out, g.TracePlansOut)
        plans = [
            p.model_copy(update={"evidence_indices": [], "key_information": []}) for p in out.traces
        ]
        self.noise_plans[(e, k)] = plans
        for t, plan in enumerate(plans):
            self._write(
                f"E{e + 1}P{k + 1}N{t + 1}",
                (e, k, "noise", t),
                plan,
                phase.title,
                phase.description,
                "",
                [],
                [],
                self.snapshots[before + 1],
            )

    def _write(
        self,
        key: str,
        slot: tuple,
        plan: g.TracePlan,
        title: str,
        description: str,
        place: str,
        people: list[str],
        carried: list[g.EvidenceDraft],
        mood: g.Snapshot,
    ) -> None:
        inp = g.TraceWriteInput(
            persona=self.brief,
            relations=self.relations or [],
            plan=plan,
            event_title=title,
            event_description=description,
            place=place,
            people=people,
            evidence=carried,
            mood=mood,
            trace_key=key,
            language=self.language,
        )

        def on_content(out: BaseModel) -> None:
            assert isinstance(out, g.TraceContent)
            self.contents[slot] = out.content

        self._go(S.TRACE_CONTENT, inp, key, on_content)

    # -- helpers -----------------------------------------------------------------------------

    @property
    def brief(self) -> g.PersonaBrief:
        assert self.profile is not None
        p = self.profile
        return g.PersonaBrief(
            name=p.name,
            age=p.age,
            gender=p.gender,
            occupation=p.occupation,
            employer=p.employer,
            city=p.city,
            interests=p.interests,
            personality=p.personality,
        )

    def arc_briefs(self, e: int) -> list[g.ArcBrief]:
        """Where every arc stands during major event ``e``, and where it is heading next."""
        out = []
        for arc in self.arcs:
            idx = _alignment(self.events[e], arc) if self.events else 0
            nxt = _alignment(self.events[e + 1], arc) if e + 1 < len(self.events) else idx
            idx = min(idx, len(arc.anchor_states) - 1)
            out.append(
                g.ArcBrief(
                    key=arc.key,
                    dimension=arc.dimension,
                    theme=arc.theme,
                    title=arc.title,
                    current_state=arc.anchor_states[idx].state,
                    current_index=idx,
                    next_state=arc.anchor_states[idx + 1].state
                    if nxt > idx and idx + 1 < len(arc.anchor_states)
                    else None,
                )
            )
        return out

    def phase_dates(self, e: int, k: int) -> tuple[dt.date, dt.date]:
        start = self.events[e].date
        end = self.events[e + 1].date if e + 1 < len(self.events) else self.spec.timeline_end
        span = max(1, (end - start).days)
        n = self.gen.phases_per_event
        a = start + dt.timedelta(days=span * k // n)
        b = start + dt.timedelta(days=max(span * (k + 1) // n - 1, span * k // n))
        return a, b


def _alignment(event: g.MajorEvent, arc: g.LifeArc) -> int:
    return next((a.anchor_index for a in event.alignments if a.arc_key == arc.key), 0)
