"""Turn a finished persona graph into warehouse rows with deterministic ids (the generation graph).

Items lost to failures are dropped consistently: a detailed event without any written trace goes,
with its evidence; evidence that no surviving trace carries goes too. What was dropped is reported.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass, field

from clonemem import privacy
from clonemem.generation.dag import PersonaDag
from clonemem.ids import benchmark_id, content_id, persona_id
from clonemem.schemas.generation import DetailedEvent, Phase, Profile
from clonemem.warehouse.content import PersonaRows
from clonemem.warehouse.landing import rows_hash


@dataclass
class Assembly:
    rows: PersonaRows
    dropped: list[str] = field(default_factory=list)

    @property
    def content_hash(self) -> str:
        return rows_hash(self.rows.tables)


def _ts(d: dt.date) -> dt.datetime:
    return dt.datetime.combine(d, dt.time())


def assemble(dag: PersonaDag, benchmark_name: str) -> Assembly | None:
    if dag.profile is None or not dag.arcs or not dag.events:
        return None  # stage I failed: nothing coherent to land (the failure is recorded)
    pid = persona_id(benchmark_name, dag.key)
    out = Assembly(PersonaRows(pid))
    seed_ids = _persona(out.rows, dag, dag.profile, benchmark_id(benchmark_name))
    arc_ids = _arcs(out.rows, dag, seed_ids)
    snap_ids = _snapshots(out.rows, dag, arc_ids)
    event_ids = _major_events(out.rows, dag, arc_ids)
    matter_ids = _privacy_matters(out.rows, dag, arc_ids)
    written = _Written(matter_ids=matter_ids)
    for (e, k), (phase, before, after) in sorted(dag.phases.items()):
        _phase(
            out,
            dag,
            written,
            (e, k),
            phase,
            event_ids[e],
            snap_ids[before],
            snap_ids[after],
            arc_ids,
        )
    _traces_and_evidence(out, written)
    return out


@dataclass
class _Written:
    """What the phases wrote, gathered before traces get their order and evidence its traces."""

    traces: list[dict] = field(default_factory=list)
    carried: list[tuple[str, str]] = field(default_factory=list)  # (evidence_id, trace external id)
    evidence: dict[str, tuple[dict, list[str]]] = field(
        default_factory=dict
    )  # id -> (row, arc ids)
    matter_ids: dict[str, str] = field(default_factory=dict)  # privacy matter key -> id
    reached: dict[str, list[str]] = field(
        default_factory=dict
    )  # trace external id -> who it reached
    matters: dict[str, list[str]] = field(
        default_factory=dict
    )  # evidence id -> its sensitive matters' keys


def _persona(rows: PersonaRows, dag: PersonaDag, p: Profile, bid: str) -> dict[str, str]:
    """The persona, its relations and its event seeds; returns seed concept -> seed id."""
    pid = rows.persona_id
    rows.add(
        "personas",
        {
            "persona_id": pid,
            "benchmark_id": bid,
            "person_key": dag.key,
            "seq": dag.spec.index,
            "person_name": p.name,
            "language": dag.language,
            "big_five": dag.spec.big_five.model_dump_json(),
            "profile": p.model_dump_json(),
            "narrative": p.narrative,
            "timeline_start": _ts(dag.spec.timeline_start),
            "timeline_end": _ts(dag.spec.timeline_end),
            "source_file": None,
        },
    )
    for i, r in enumerate(dag.relations or []):
        rows.add(
            "relations",
            {
                "relation_id": content_id(pid, "relation", i),
                "persona_id": pid,
                "seq": i,
                "name": r.name,
                "relation_type": r.relation_type,
                "description": f"{r.role}: {r.description}",
            },
        )
    seed_ids: dict[str, str] = {}
    for i, s in enumerate(dag.seeds or []):
        seed_ids.setdefault(s.concept, content_id(pid, "seed", i))
        rows.add(
            "event_seeds",
            {
                "seed_id": content_id(pid, "seed", i),
                "persona_id": pid,
                "seq": i,
                "concept": s.concept,
                "origin": s.origin,
                "rationale": s.rationale,
            },
        )
    return seed_ids


def _arcs(rows: PersonaRows, dag: PersonaDag, seed_ids: dict[str, str]) -> dict[str, str]:
    """Life arcs with their anchor states; returns arc key -> arc id."""
    pid = rows.persona_id
    arc_ids = {a.key: content_id(pid, "arc", a.key) for a in dag.arcs}
    for i, a in enumerate(dag.arcs):
        rows.add(
            "life_arcs",
            {
                "arc_id": arc_ids[a.key],
                "persona_id": pid,
                "seq": i,
                "dimension": a.dimension,
                "title": a.title,
                "description": a.description,
                "seed_id": seed_ids.get(a.seed_concept),
                "theme": a.theme,
            },
        )
        for j, st in enumerate(a.anchor_states):
            rows.add(
                "arc_anchor_states",
                {
                    "arc_id": arc_ids[a.key],
                    "idx": j,
                    "state": st.state,
                    "trigger_logic": st.trigger_logic,
                    "behavioural_cues": st.behavioural_cues,
                },
            )
    return arc_ids


def _snapshots(rows: PersonaRows, dag: PersonaDag, arc_ids: dict[str, str]) -> list[str]:
    """The carried chain of snapshots; returns their ids in order."""
    pid = rows.persona_id
    snap_ids = [content_id(pid, "snapshot", i) for i in range(len(dag.snapshots))]
    for i, s in enumerate(dag.snapshots):
        rows.add(
            "snapshots",
            {
                "snapshot_id": snap_ids[i],
                "persona_id": pid,
                "seq": i,
                "energy": s.energy,
                "stress": s.stress,
                "dominant_emotion": s.dominant_emotion,
                "attentional_focus": s.attentional_focus,
                "arc_status": json.dumps(
                    {arc_ids.get(x.arc_key, x.arc_key): x.status for x in s.arc_status},
                    ensure_ascii=False,
                    sort_keys=True,
                ),
            },
        )
    return snap_ids


def _major_events(rows: PersonaRows, dag: PersonaDag, arc_ids: dict[str, str]) -> list[str]:
    """Major events with the arcs they align with; returns their ids in order."""
    pid = rows.persona_id
    event_ids = [content_id(pid, "major_event", e) for e in range(len(dag.events))]
    for e, ev in enumerate(dag.events):
        rows.add(
            "major_events",
            {
                "major_event_id": event_ids[e],
                "persona_id": pid,
                "seq": e,
                "event_date": _ts(ev.date),
                "title": ev.title,
                "description": ev.description,
            },
        )
        for al in ev.alignments:
            if al.arc_key in arc_ids:
                rows.add(
                    "major_event_arcs",
                    {
                        "major_event_id": event_ids[e],
                        "arc_id": arc_ids[al.arc_key],
                        "anchor_idx": al.anchor_index,
                    },
                )
    return event_ids


def _privacy_matters(rows: PersonaRows, dag: PersonaDag, arc_ids: dict[str, str]) -> dict[str, str]:
    """The persona's sensitive matters and who may know each; returns matter key -> matter id."""
    pid = rows.persona_id
    ids = {m.key: content_id(pid, "privacy", m.key) for m in dag.privacy}
    for i, m in enumerate(dag.privacy):
        rows.add(
            "privacy_matters",
            {
                "matter_id": ids[m.key],
                "persona_id": pid,
                "seq": i,
                "matter_key": m.key,
                "category": m.category,
                "arc_id": arc_ids.get(m.arc_key),
                "kinds": json.dumps(m.kinds),
                "subject": m.subject,
                "may_know": json.dumps(m.may_know, ensure_ascii=False),
            },
        )
    return ids


def _phase(
    out: Assembly,
    dag: PersonaDag,
    written: _Written,
    ek: tuple[int, int],
    phase: Phase,
    event_id: str,
    before_id: str,
    after_id: str,
    arc_ids: dict[str, str],
) -> None:
    """One phase, its detailed events (with their evidence and traces) and its noise traces."""
    e, k = ek
    pid = out.rows.persona_id
    phase_id = content_id(event_id, "phase", k)
    out.rows.add(
        "phases",
        {
            "phase_id": phase_id,
            "major_event_id": event_id,
            "seq": k,
            "start_date": _ts(phase.start_date),
            "end_date": _ts(phase.end_date),
            "title": phase.title,
            "description": phase.description,
            "snapshot_before_id": before_id,
            "snapshot_after_id": after_id,
        },
    )
    for i, de in enumerate(dag.detailed.get(ek, [])):
        _detailed_event(
            out, dag, written, (e, k, i), de, content_id(phase_id, "event", i), phase_id, arc_ids
        )
    names = [r.name for r in dag.relations or []]
    for t, plan in enumerate(dag.noise_plans.get(ek, [])):
        if (e, k, "noise", t) in dag.contents:
            written.traces.append(
                _trace(
                    pid,
                    content_id(phase_id, "noise", t),
                    plan,
                    dag.contents[(e, k, "noise", t)],
                    None,
                    True,
                    privacy.disclosed_to(plan.audience, plan.medium, names),
                )
            )


def _detailed_event(
    out: Assembly,
    dag: PersonaDag,
    written: _Written,
    eki: tuple[int, int, int],
    de: DetailedEvent,
    de_id: str,
    phase_id: str,
    arc_ids: dict[str, str],
) -> None:
    """A detailed event with its evidence and written traces; dropped when none of its traces was written."""
    e, k, i = eki
    pid = out.rows.persona_id
    written_plans = [
        (t, plan) for t, plan in enumerate(dag.plans.get(eki, [])) if (e, k, i, t) in dag.contents
    ]
    if not written_plans:
        out.dropped.append(f"detailed event E{e + 1}P{k + 1}D{i + 1}: no trace written")
        return
    out.rows.add(
        "detailed_events",
        {
            "detailed_event_id": de_id,
            "phase_id": phase_id,
            "seq": i,
            "event_date": _ts(de.date),
            "title": de.title,
            "description": de.description,
            "people": json.dumps(de.people, ensure_ascii=False),
            "place": de.place,
        },
    )
    ev_ids = [content_id(de_id, "evidence", j) for j in range(len(de.evidence))]
    for j, ev in enumerate(de.evidence):
        written.evidence[ev_ids[j]] = (
            {
                "evidence_id": ev_ids[j],
                "persona_id": pid,
                "detailed_event_id": de_id,
                "seq": j,
                "kind": ev.kind,
                "statement": ev.statement,
            },
            [arc_ids[a] for a in ev.arc_keys if a in arc_ids],
        )
        written.matters[ev_ids[j]] = [
            m.key for m in privacy.matters_of(ev.kind, ev.arc_keys, dag.privacy)
        ]
    names = [r.name for r in dag.relations or []]
    for t, plan in written_plans:
        ext = content_id(de_id, "trace", t)
        written.reached[ext] = privacy.disclosed_to(plan.audience, plan.medium, names)
        written.traces.append(
            _trace(pid, ext, plan, dag.contents[(e, k, i, t)], de_id, False, written.reached[ext])
        )
        written.carried += [(ev_ids[j], ext) for j in plan.evidence_indices]


def _traces_and_evidence(out: Assembly, written: _Written) -> None:
    """Traces in time order (seq is their position in the exported context), then the evidence that a
    written trace carries, with its arcs and traces; evidence no trace carries is dropped."""
    add = out.rows.add
    traces = written.traces
    traces.sort(key=lambda r: (r["event_date"], r["external_id"]))
    trace_key = {}
    for seq, row in enumerate(traces):
        row["seq"] = seq
        trace_key[row["external_id"]] = row["trace_id"]
        add("traces", row)
    by_evidence: dict[str, list[str]] = {}
    reached: dict[str, list[list[str]]] = {}
    for eid, ext in written.carried:
        by_evidence.setdefault(eid, [])
        reached.setdefault(eid, []).append(written.reached[ext])
        if trace_key[ext] not in by_evidence[eid]:
            by_evidence[eid].append(trace_key[ext])
    seq_of = {row["trace_id"]: row["seq"] for row in traces}
    for eid, (row, arcs) in written.evidence.items():
        tids = sorted(by_evidence.get(eid, []), key=seq_of.__getitem__)
        if not tids:
            out.dropped.append(f"evidence {row['statement'][:40]!r}: carried by no written trace")
            continue
        add("evidence", row)
        for a in sorted(set(arcs)):
            add("evidence_arcs", {"evidence_id": eid, "arc_id": a})
        for s, tid in enumerate(tids):
            add("evidence_traces", {"evidence_id": eid, "trace_id": tid, "seq": s})
        keys = written.matters.get(eid, [])
        add(
            "evidence_privacy",
            {
                "evidence_id": eid,
                "persona_id": row["persona_id"],
                "matter_ids": json.dumps([written.matter_ids[k] for k in keys]),
                "sensitive": bool(keys),
                "disclosed_to": json.dumps(
                    privacy.merge_disclosed(reached[eid]), ensure_ascii=False
                ),
            },
        )


def _trace(
    pid: str, ext: str, plan, content: str, de_id: str | None, noise: bool, reached: list[str]
) -> dict:
    return {
        "trace_id": content_id(pid, "trace", ext),
        "persona_id": pid,
        "external_id": ext,
        "seq": 0,
        "medium": plan.medium,
        "event_date": plan.timestamp.replace(tzinfo=None),
        "content": content,
        "detailed_event_id": de_id,
        "intent": plan.intent,
        "audience": plan.audience,
        "key_information": json.dumps(plan.key_information, ensure_ascii=False),
        "is_noise": noise,
        "reached": json.dumps(reached, ensure_ascii=False),
    }
