"""LLM steps of the memory systems (extractor role): the flat retrievers' extraction ablations,
Mem0, A-Mem and O-Mem.

Each step is a stage (name, template, role, input and output schema); the systems call them through
``BuildContext.llm`` and the offline world answers them in ``clonemem.offline.world.memsys``. One stage
per step of each published algorithm; each call covers a group of consecutive traces (see
``clonemem.schemas.memsys``)."""

from __future__ import annotations

from clonemem.schemas.memory import TraceSummary, TraceText
from clonemem.schemas.memsys import (
    AMemEvolution,
    AMemEvolveIn,
    AMemLinks,
    AMemLinksIn,
    AMemNoteIn,
    AMemNotes,
    Mem0ExtractIn,
    Mem0Facts,
    Mem0Operations,
    Mem0UpdateIn,
    OMemExtractIn,
    OMemExtractions,
    OMemRouteIn,
    OMemRoutes,
)
from clonemem.stages import define

# Flat retrievers' "combined" / "w/o org" ablations (CloneMem D.2): summary, keyphrases, facts per trace.
SUMMARIZE_TRACE = define(
    "memory.summarize_trace",
    "summarize_trace",
    "extractor",
    TraceText,
    TraceSummary,
    offline="clonemem.offline.memory:summarize_trace",
)

# Mem0 (Chhikara et al., 2025): extraction phase, then the update decisions for the extracted facts.
MEM0_EXTRACT = define(
    "memory.mem0_extract",
    "mem_mem0_extract",
    "extractor",
    Mem0ExtractIn,
    Mem0Facts,
    offline="clonemem.offline.world.memsys:mem0_extract",
)
MEM0_UPDATE = define(
    "memory.mem0_update",
    "mem_mem0_update",
    "extractor",
    Mem0UpdateIn,
    Mem0Operations,
    offline="clonemem.offline.world.memsys:mem0_update",
)

# A-Mem (Xu et al., 2025): note construction, link generation, memory evolution.
AMEM_NOTE = define(
    "memory.amem_note",
    "mem_amem_note",
    "extractor",
    AMemNoteIn,
    AMemNotes,
    offline="clonemem.offline.world.memsys:amem_note",
)
AMEM_LINKS = define(
    "memory.amem_links",
    "mem_amem_links",
    "extractor",
    AMemLinksIn,
    AMemLinks,
    offline="clonemem.offline.world.memsys:amem_links",
)
AMEM_EVOLVE = define(
    "memory.amem_evolve",
    "mem_amem_evolve",
    "extractor",
    AMemEvolveIn,
    AMemEvolution,
    offline="clonemem.offline.world.memsys:amem_evolve",
)

# O-Mem (OPPO, 2025): topic / attribute / event extraction (eq. 1), add-ignore-update routing (eqs. 3-4).
OMEM_EXTRACT = define(
    "memory.omem_extract",
    "mem_omem_extract",
    "extractor",
    OMemExtractIn,
    OMemExtractions,
    offline="clonemem.offline.world.memsys:omem_extract",
)
OMEM_ROUTE = define(
    "memory.omem_route",
    "mem_omem_route",
    "extractor",
    OMemRouteIn,
    OMemRoutes,
    offline="clonemem.offline.world.memsys:omem_route",
)

ALL = (MEM0_EXTRACT, MEM0_UPDATE, AMEM_NOTE, AMEM_LINKS, AMEM_EVOLVE, OMEM_EXTRACT, OMEM_ROUTE)
