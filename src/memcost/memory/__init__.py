"""Memory systems: the paper's (``mem0_style``, paper §3.1) and the ones the field compares it
with, behind one interface (:mod:`memcost.memory.base`), found by name.

Each system is one module that registers itself: ``mem0_style`` (the paper's: extracted facts,
the update phase, the run's vector store), ``rag``, ``graph``, ``hierarchical``,
``observational``, and the real libraries ``mem0``, ``cognee`` and ``hindsight`` (optional
extras). Every system's answers go through the same reader (:mod:`memcost.memory.reader`).
"""

from memcost.memory import (  # noqa: F401 - each module registers its system
    cognee_library,
    graph,
    hierarchical,
    hindsight_library,
    mem0_library,
    mem0_style,
    observational,
    rag,
)
from memcost.memory.base import (
    MemorySystem,
    Recall,
    SystemBuild,
    open_system,
    open_systems,
    parse_systems,
    register,
    system_class,
    system_names,
)

__all__ = [
    "MemorySystem",
    "Recall",
    "SystemBuild",
    "open_system",
    "open_systems",
    "parse_systems",
    "register",
    "system_class",
    "system_names",
]
