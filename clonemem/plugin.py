"""The stable plugin API: everything a package outside this project needs to add a memory system, an
importer or an LLM provider, in one module.

A plugin imports only from here (``from clonemem.plugin import MemorySystem, define, ...``); the modules
these names come from are internal and may move. The names in ``__all__`` are the contract:
removing or renaming one is a breaking change (``tests/test_plugin_api.py`` pins them), adding one is
not. What each kind of plugin implements, and how it is registered (an entry point in the group of its
registry, or a name on the command line), is in docs/architecture.md, "Recipes".

* memory systems: :class:`MemorySystem` with the records it reads and returns (:class:`MemoryTrace`,
  :class:`QuestionView`, :class:`Retrieved`, :class:`BuildContext`), registered in :data:`SYSTEMS`
  (entry-point group ``clonemem.memory_systems``); a failure of the system is
  :class:`MemorySystemFailed`;
* LLM stages a system calls: :func:`define` (name, template, role, input and output models, offline
  handler), the handler's :class:`OfflineCall`;
* importers: :class:`Importer` returning :class:`ParsedPersona` (its content in the release models,
  ``Release*``, and one :class:`QuestionSource` per question), failing with :class:`ImportFailed` of
  :class:`Problem` s; registered in :data:`IMPORTERS` (group ``clonemem.importers``);
* providers: :class:`ModelAPI` (``generate(GenerateRequest) -> GenerateResult``, raising
  :class:`TransientError` or :class:`PermanentError`), built from a :class:`RunConfig`; registered
  in :data:`PROVIDERS` (group ``clonemem.providers``); :class:`OfflineAPI` is the offline world as
  a provider, to build on;
* the memory protocol's bodies (a system served over HTTP): the module :mod:`memory_protocol`
  (``memory_protocol.QueryRequest``, ``memory_protocol.Items``, ...), at :data:`PROTOCOL_VERSION`;
* registries: :class:`Registry` (``add``, ``added`` for a while, ``remove``), :class:`RegistryError`.
"""

from __future__ import annotations

from clonemem.importers import IMPORTERS
from clonemem.importers.base import (
    Importer,
    ImportFailed,
    ParsedPersona,
    Problem,
    QuestionSource,
    detect_language,
)
from clonemem.llm.providers.base import ModelAPI
from clonemem.llm.providers.offline import OfflineAPI
from clonemem.llm.registry import PROVIDERS
from clonemem.llm.types import (
    GenerateRequest,
    GenerateResult,
    Message,
    PermanentError,
    TransientError,
)
from clonemem.memory import SYSTEMS
from clonemem.memory.base import (
    BuildContext,
    BuildProgress,
    LLMStep,
    MemorySystem,
    MemoryTrace,
    QuestionView,
    Retrieved,
)
from clonemem.memory.errors import MemorySystemFailed
from clonemem.offline import OfflineCall
from clonemem.registry import Registry, RegistryError
from clonemem.schemas import memory_protocol
from clonemem.schemas.config import Role, RunConfig
from clonemem.schemas.memory_protocol import VERSION as PROTOCOL_VERSION
from clonemem.schemas.release import (
    ReleaseChoice,
    ReleaseEvidence,
    ReleaseFile,
    ReleasePrivacy,
    ReleasePrivacyItem,
    ReleaseQuestion,
    ReleaseTrace,
)
from clonemem.stages import Stage, define

__all__ = [
    # memory systems
    "SYSTEMS",
    "BuildContext",
    "BuildProgress",
    "LLMStep",
    "MemorySystem",
    "MemorySystemFailed",
    "MemoryTrace",
    "QuestionView",
    "Retrieved",
    # stages
    "OfflineCall",
    "Role",
    "Stage",
    "define",
    # importers
    "IMPORTERS",
    "ImportFailed",
    "Importer",
    "ParsedPersona",
    "Problem",
    "QuestionSource",
    "ReleaseChoice",
    "ReleaseEvidence",
    "ReleaseFile",
    "ReleasePrivacy",
    "ReleasePrivacyItem",
    "ReleaseQuestion",
    "ReleaseTrace",
    "detect_language",
    # providers
    "PROVIDERS",
    "GenerateRequest",
    "GenerateResult",
    "Message",
    "ModelAPI",
    "OfflineAPI",
    "PermanentError",
    "RunConfig",
    "TransientError",
    # the memory protocol
    "PROTOCOL_VERSION",
    "memory_protocol",
    # registries
    "Registry",
    "RegistryError",
]
