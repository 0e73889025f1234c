"""Stage II offline handlers: the initial snapshot, phases, and the snapshot update (Algorithm 1)."""

from __future__ import annotations

from clonemem.offline import OfflineCall
from clonemem.offline.world.common import (
    arc_state,
    archetype_of,
    cap,
    fill,
    first_name,
    lexicon,
    persona_slots,
    pick,
)
from clonemem.schemas.generation import (
    ArcBrief,
    ArcDevelopment,
    ArcStatus,
    InitialSnapshotInput,
    Phase,
    PhaseInput,
    Snapshot,
    SnapshotUpdateInput,
)

# How a phase's tone moves the carried state: (stress delta, energy delta).
TONE_EFFECT = {
    "stressful": (2, -1),
    "strained": (1, -1),
    "steady": (-1, 1),
    "hopeful": (-1, 1),
    "relieved": (-2, 1),
    "joyful": (-2, 2),
}


def clamp(v: int) -> int:
    return max(1, min(10, v))


def phase_state_index(arc: ArcBrief, phase_index: int, phase_count: int) -> int:
    """Within an event an arc sits at its current state, then moves to the next in the later phases."""
    if arc.next_state is None or phase_index < (phase_count + 1) // 2:
        return arc.current_index
    return arc.current_index + 1


def focus_text(arc: ArcBrief, lex, slots: dict[str, str]) -> str:
    arche = archetype_of(arc.theme, lex)
    template = lex.domain_focus.get(arche.domain, "{hobby}")
    return fill(template, slots)


def initial_snapshot(call: OfflineCall) -> Snapshot:
    inp = call.inputs
    assert isinstance(inp, InitialSnapshotInput)
    lex, rng = lexicon(inp.language), call.rng
    primary = next((a for a in inp.arcs if a.key == inp.first_event.primary_arc), inp.arcs[0])
    _, state = arc_state(primary, lex)
    # start moderate, leaning the way the arcs' first states lean
    lean = sum(TONE_EFFECT[arc_state(arc, lex)[1].tone][0] for arc in inp.arcs)
    stress, energy = 4 + (lean > 0) - (lean < 0), 6 - (lean > 0)
    slots = persona_slots(inp.persona, [], lex, rng)
    return Snapshot(
        energy=clamp(energy),
        stress=clamp(stress),
        dominant_emotion=pick(rng, lex.tone_emotions[state.tone]),
        attentional_focus=focus_text(primary, lex, slots),
        arc_status=[ArcStatus(arc_key=a.key, status=a.current_state) for a in inp.arcs],
    )


def phase(call: OfflineCall) -> Phase:
    inp = call.inputs
    assert isinstance(inp, PhaseInput)
    lex, rng = lexicon(inp.language), call.rng
    slots = persona_slots(inp.persona, inp.relations, lex, rng)
    primary = next((a for a in inp.arcs if a.key == inp.event.primary_arc), inp.arcs[0])
    idx = phase_state_index(primary, inp.phase_index, inp.phase_count)
    _, state = arc_state(primary, lex, idx)
    stage = (
        "early"
        if inp.phase_index == 0
        else "late"
        if inp.phase_index == inp.phase_count - 1
        else "middle"
    )
    developments = []
    for arc in inp.arcs:
        i = phase_state_index(arc, inp.phase_index, inp.phase_count)
        if i != arc.current_index and arc.next_state:
            text = fill(
                lex.s("development"),
                {
                    "arc_title": arc.title,
                    "from_state": arc.current_state,
                    "to_state": arc.next_state,
                },
            )
        else:
            text = fill(
                lex.s("development_hold"), {"arc_title": arc.title, "state": arc.current_state}
            )
        developments.append(ArcDevelopment(arc_key=arc.key, development=text))
    primary_dev = next(d.development for d in developments if d.arc_key == primary.key)
    return Phase(
        title=fill(lex.s(f"phase_title_{stage}"), {"event": inp.event.title}),
        description=fill(
            lex.s("phase_description"),
            {
                "first": first_name(inp.persona, lex),
                "state": fill(state.state, slots),
                "focus": focus_text(primary, lex, slots),
                "development": primary_dev,
            },
        ),
        start_date=inp.start_date,
        end_date=inp.end_date,
        tone=state.tone,
        arc_developments=developments,
    )


def update_snapshot(call: OfflineCall) -> Snapshot:
    inp = call.inputs
    assert isinstance(inp, SnapshotUpdateInput)
    lex, rng = lexicon(inp.language), call.rng
    d_stress, d_energy = TONE_EFFECT[inp.phase.tone]
    moved = {d.arc_key: d.development for d in inp.phase.arc_developments}
    status = []
    for arc in inp.arcs:
        old = next(
            (s.status for s in inp.snapshot.arc_status if s.arc_key == arc.key), arc.current_state
        )
        # an arc whose phase development moves it on now reports its next state
        if arc.next_state and arc.next_state in moved.get(arc.key, "") and old != arc.next_state:
            status.append(ArcStatus(arc_key=arc.key, status=arc.next_state))
        else:
            status.append(ArcStatus(arc_key=arc.key, status=old))
    # attention goes to the arc that is moving, else to the first one
    primary = next(
        (a for a in inp.arcs if a.next_state and a.next_state in moved.get(a.key, "")), inp.arcs[0]
    )
    slots = persona_slots(inp.persona, [], lex, rng)
    return Snapshot(
        energy=clamp(inp.snapshot.energy + d_energy),
        stress=clamp(inp.snapshot.stress + d_stress),
        dominant_emotion=pick(rng, lex.tone_emotions[inp.phase.tone]),
        attentional_focus=cap(focus_text(primary, lex, slots)),
        arc_status=status,
    )
