"""Memory systems behind one interface (:mod:`memcost.memory.base`), found by name: the paper's
``mem0_style`` (paper §3.1) here, the others in plugins (:mod:`memcost.plugins`). Every system's
answers go through the same reader (:mod:`memcost.memory.reader`)."""

from memcost.memory import mem0_style  # noqa: F401 - registers the paper's system
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
