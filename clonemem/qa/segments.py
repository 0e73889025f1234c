"""Arc buckets and the sliding window over the global timeline (CloneMem A.5)."""

from __future__ import annotations

import datetime as dt
import json

from clonemem.ids import content_id
from clonemem.schemas.config import QAConfig
from clonemem.schemas.generation import PersonaBrief, PrivacyMatter, Profile, Relation
from clonemem.schemas.qa import ArcView, Segment, SegmentEvidence
from clonemem.warehouse import Warehouse


def persona_segments(wh: Warehouse, persona_id: str, qa: QAConfig) -> list[Segment]:
    """At each window position, every arc bucket that gained evidence yields one segment: the arc's
    evidence accumulated up to the window's end."""
    ((profile_json, language, start, end),) = wh.rows(
        "SELECT profile::VARCHAR, language, timeline_start, timeline_end FROM personas WHERE persona_id = ?",
        [persona_id],
    )
    profile = Profile.model_validate_json(profile_json)
    brief = PersonaBrief(
        name=profile.name,
        age=profile.age,
        gender=profile.gender,
        occupation=profile.occupation,
        employer=profile.employer,
        city=profile.city,
        interests=profile.interests,
        personality=profile.personality,
    )
    relations = [
        Relation(
            name=n,
            relation_type=t,
            role=d.split(":", 1)[0],
            description=d.split(":", 1)[-1].strip(),
        )
        for n, t, d in wh.rows(
            "SELECT name, relation_type, description FROM relations WHERE persona_id = ? "
            "ORDER BY seq",
            [persona_id],
        )
    ]
    arcs: dict[str, ArcView] = {}
    for arc_id, seq, dim, title, theme, states in wh.rows(
        "SELECT a.arc_id, a.seq, a.dimension, a.title, coalesce(a.theme, ''), "
        "list(s.state ORDER BY s.idx) FROM life_arcs a JOIN arc_anchor_states s USING (arc_id) "
        "WHERE a.persona_id = ? GROUP BY ALL ORDER BY a.seq",
        [persona_id],
    ):
        arcs[arc_id] = ArcView(
            key=f"A{seq + 1}", dimension=dim, theme=theme, title=title, states=states
        )
    matters, matter_key = privacy_matters(wh, persona_id)
    buckets: dict[str, list[SegmentEvidence]] = {a: [] for a in arcs}
    for eid, arc_id, date, kind, statement, tids, last, matter_ids, disclosed in wh.rows(
        "SELECT e.evidence_id, ea.arc_id, d.event_date, e.kind, e.statement, "
        "list(et.trace_id ORDER BY et.seq), max(t.event_date), "
        "coalesce(any_value(p.matter_ids)::VARCHAR, '[]'), coalesce(any_value(p.disclosed_to)::VARCHAR, '[]') "
        "FROM evidence e JOIN evidence_arcs ea USING (evidence_id) JOIN detailed_events d USING (detailed_event_id) "
        "JOIN evidence_traces et USING (evidence_id) JOIN traces t ON t.trace_id = et.trace_id "
        "LEFT JOIN evidence_privacy p ON p.evidence_id = e.evidence_id "
        "WHERE e.persona_id = ? GROUP BY ALL ORDER BY d.event_date, e.evidence_id",
        [persona_id],
    ):
        buckets[arc_id].append(
            SegmentEvidence(
                evidence_id=eid,
                date=date.date(),
                kind=kind,
                statement=statement,
                trace_ids=tids,
                last_trace_at=last,
                matters=[matter_key[m] for m in json.loads(matter_ids) if m in matter_key],
                disclosed_to=json.loads(disclosed),
            )
        )
    segments = []
    first, last_day = start.date(), end.date()
    w = 0
    while first + dt.timedelta(days=w * qa.stride_days) < last_day:
        w_start = first + dt.timedelta(days=w * qa.stride_days)
        w_end = min(w_start + dt.timedelta(days=qa.window_days), last_day)
        for arc_id, arc in arcs.items():
            new = [e for e in buckets[arc_id] if w_start <= e.date < w_end]
            if not new:
                continue  # the bucket did not change at this position: not active
            segments.append(
                Segment(
                    segment_id=content_id(persona_id, "segment", arc.key, w),
                    persona=brief,
                    relations=relations,
                    arc=arc,
                    other_arcs=[a for k, a in arcs.items() if k != arc_id],
                    window_index=w,
                    window_start=w_start,
                    window_end=w_end,
                    evidence=[e for e in buckets[arc_id] if e.date < w_end],
                    new_evidence_ids=[e.evidence_id for e in new],
                    timeline_end=last_day,
                    language=language or "en",
                    privacy=matters,
                )
            )
        w += 1
    return segments


def privacy_matters(wh: Warehouse, persona_id: str) -> tuple[list[PrivacyMatter], dict[str, str]]:
    """The persona's sensitive matters (none for an imported persona), and matter id -> key."""
    matters, keys = [], {}
    for mid, key, category, arc_seq, kinds, subject, may_know in wh.rows(
        "SELECT m.matter_id, m.matter_key, m.category, a.seq, m.kinds::VARCHAR, m.subject, m.may_know::VARCHAR "
        "FROM privacy_matters m JOIN life_arcs a USING (arc_id) WHERE m.persona_id = ? ORDER BY m.seq",
        [persona_id],
    ):
        keys[mid] = key
        matters.append(
            PrivacyMatter.model_validate(
                {
                    "key": key,
                    "category": category,
                    "arc_key": f"A{arc_seq + 1}",
                    "kinds": json.loads(kinds),
                    "subject": subject,
                    "may_know": json.loads(may_know),
                }
            )
        )
    return matters, keys


def segment_row(seg: Segment, persona_id: str, arc_id: str) -> dict:
    return {
        "segment_id": seg.segment_id,
        "persona_id": persona_id,
        "arc_id": arc_id,
        "window_idx": seg.window_index,
        "window_start": dt.datetime.combine(seg.window_start, dt.time()),
        "window_end": dt.datetime.combine(seg.window_end, dt.time()),
        "evidence_ids": json.dumps([e.evidence_id for e in seg.evidence]),
    }
