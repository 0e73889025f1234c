"""Every LLM step of generation stages I–III."""

from __future__ import annotations

from clonemem.schemas import generation as g
from clonemem.stages import STAGES, Stage, define

__all__ = ["STAGES", "Stage"]

PERSONA = define(
    "generation.persona",
    "gen_persona",
    "generator",
    g.PersonaSpec,
    g.Profile,
    offline="clonemem.offline.world.macro:enrich_persona",
)
RELATIONS = define(
    "generation.relations",
    "gen_relations",
    "generator",
    g.RelationsInput,
    g.RelationsOut,
    offline="clonemem.offline.world.macro:relations",
)
SEEDS = define(
    "generation.seeds",
    "gen_seeds",
    "generator",
    g.SeedsInput,
    g.SeedsOut,
    offline="clonemem.offline.world.macro:select_seeds",
)
ARCS = define(
    "generation.arcs",
    "gen_arcs",
    "generator",
    g.ArcsInput,
    g.ArcsOut,
    offline="clonemem.offline.world.macro:life_arcs",
)
PRIVACY = define(
    "generation.privacy",
    "gen_privacy",
    "generator",
    g.PrivacyInput,
    g.PrivacyOut,
    offline="clonemem.offline.world.privacy:boundaries",
)
MAJOR_EVENTS = define(
    "generation.major_events",
    "gen_major_events",
    "generator",
    g.MajorEventsInput,
    g.MajorEventsOut,
    offline="clonemem.offline.world.macro:major_events",
)
INITIAL_SNAPSHOT = define(
    "generation.initial_snapshot",
    "gen_initial_snapshot",
    "generator",
    g.InitialSnapshotInput,
    g.Snapshot,
    offline="clonemem.offline.world.meso:initial_snapshot",
)
PHASE = define(
    "generation.phase",
    "gen_phase",
    "generator",
    g.PhaseInput,
    g.Phase,
    offline="clonemem.offline.world.meso:phase",
)
SNAPSHOT_UPDATE = define(
    "generation.snapshot_update",
    "gen_snapshot_update",
    "generator",
    g.SnapshotUpdateInput,
    g.Snapshot,
    offline="clonemem.offline.world.meso:update_snapshot",
)
DETAILED_EVENTS = define(
    "generation.detailed_events",
    "gen_detailed_events",
    "generator",
    g.DetailedEventsInput,
    g.DetailedEventsOut,
    offline="clonemem.offline.world.micro:detailed_events",
)
TRACE_PLANS = define(
    "generation.trace_plans",
    "gen_trace_plans",
    "generator",
    g.TracePlansInput,
    g.TracePlansOut,
    offline="clonemem.offline.world.micro:trace_plans",
)
NOISE_PLANS = define(
    "generation.noise_plans",
    "gen_noise_plans",
    "generator",
    g.NoisePlansInput,
    g.TracePlansOut,
    offline="clonemem.offline.world.micro:noise_plans",
)
TRACE_CONTENT = define(
    "generation.trace_content",
    "gen_trace_content",
    "generator",
    g.TraceWriteInput,
    g.TraceContent,
    offline="clonemem.offline.world.micro:write_trace",
)
