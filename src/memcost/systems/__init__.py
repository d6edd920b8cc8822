"""The memory systems the study compares, behind one interface, found by name.

- :mod:`~memcost.systems.base`: :class:`MemorySystem` (build, recall, state), :class:`Recall`,
  the registry (:func:`system_names`, :func:`open_system`);
- :mod:`~memcost.systems.mem0_style`: the paper's (``memory``);
- :mod:`~memcost.systems.mem0_library`: the mem0 library itself, through the metering gateway
  (``memory_mem0``);
- :mod:`~memcost.systems.cognee_library`: the cognee library, in its own environment
  (:mod:`~memcost.systems.cognee_worker`), through the same gateway (``memory_cognee``);
- :mod:`~memcost.systems.hindsight_library`: the Hindsight server, in its own environment, through
  the same gateway (``memory_hindsight``); :mod:`~memcost.systems.environments`: where such
  libraries live;
- :mod:`~memcost.systems.rag`: raw chunks, embedded (``memory_rag``);
- :mod:`~memcost.systems.graph`: Mem0^g, entities and relation triples (``memory_graph``);
- :mod:`~memcost.systems.hierarchical`: L1 prompt, L2 working memory, L3 archive
  (``memory_hierarchical``);
- :mod:`~memcost.systems.observational`: observer and reflector (``memory_observational``);
- :mod:`~memcost.systems.stored`: what the last four share (message stream, waves, search);
- :mod:`~memcost.systems.store`: the owner of their files, ``<ds>/memory/systems/<name>/``;
- :mod:`~memcost.systems.answer`: every system's answers through the same reader.

Each system's offline stand-ins are in :mod:`memcost.offline`.
"""

from memcost.systems.base import (
    MemorySystem,
    Recall,
    SystemBuild,
    open_system,
    parse_systems,
    register,
    system_class,
    system_names,
)
from memcost.systems.cognee_library import CogneeLibrary
from memcost.systems.graph import GraphMemory
from memcost.systems.hierarchical import HierarchicalMemory
from memcost.systems.hindsight_library import HindsightLibrary
from memcost.systems.mem0_library import Mem0Library
from memcost.systems.mem0_style import Mem0Style
from memcost.systems.observational import ObservationalMemory
from memcost.systems.rag import Rag

__all__ = [
    "CogneeLibrary",
    "GraphMemory",
    "HierarchicalMemory",
    "HindsightLibrary",
    "Mem0Library",
    "Mem0Style",
    "MemorySystem",
    "ObservationalMemory",
    "Rag",
    "Recall",
    "SystemBuild",
    "open_system",
    "parse_systems",
    "register",
    "system_class",
    "system_names",
]
