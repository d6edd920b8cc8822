"""The memory systems the field compares with the paper's: RAG over raw chunks, graph,
hierarchical and observational memory, and the mem0, cognee and Hindsight libraries reached
through the run's gateway (docs/memory-systems.md)."""

from memcost.plugins import Plugin
from memcost_systems.cognee_library import CogneeLibrary
from memcost_systems.graph import GraphMemory
from memcost_systems.hierarchical import HierarchicalMemory
from memcost_systems.hindsight_library import HindsightLibrary
from memcost_systems.mem0_library import Mem0Library
from memcost_systems.observational import ObservationalMemory
from memcost_systems.rag import Rag
from memcost_systems.report import MEMORY_SYSTEMS

PLUGIN = Plugin(
    name="systems",
    memory_systems=(
        Rag,
        GraphMemory,
        HierarchicalMemory,
        ObservationalMemory,
        Mem0Library,
        CogneeLibrary,
        HindsightLibrary,
    ),
    report_sections=(MEMORY_SYSTEMS,),
)
