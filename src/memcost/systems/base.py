"""The memory-system interface: what every architecture the study compares does, found by name.

A memory system ingests each user's conversation once (every model call through the one client,
tagged with the system's answer name and its step) and then, per question, says what it knows
that bears on it: a few items with their text, date, score and token count (:class:`Recall`).
It reports its state per user (items stored, tokens held, model calls made).

Systems register themselves by name (:func:`register`); adding one is one module in this package
and its offline stand-in in :mod:`memcost.offline`. The paper's is ``mem0_style``; the others
are the architectures the field compares it with (docs/architecture.md, "Memory systems").
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import pandas as pd

from memcost.llm import LLMClient
from memcost.paths import DatasetPaths
from memcost.systems.store import read_user, system_dir

# The columns of a recall's items (and of every system's stored items): what the reader shows.
ITEM_COLUMNS = ("item_id", "kind", "text", "session_datetime", "score", "tokens", "positions")


@dataclass(frozen=True)
class Recall:
    """What a system brings back for one question: items best first, and the search's time."""

    items: pd.DataFrame  # ITEM_COLUMNS, best first
    latency_s: float  # the search alone (the question's embedding is the client's, recorded)

    @property
    def texts(self) -> list[str]:
        return self.items["text"].tolist()

    @property
    def tokens(self) -> int:
        return int(self.items["tokens"].sum()) if len(self.items) else 0

    @property
    def facts(self) -> pd.DataFrame:
        """The items as the reader and evidence recall read them (``text``,
        ``session_datetime``, ``source_positions``)."""
        return self.items.rename(columns={"positions": "source_positions"})


@dataclass
class SystemBuild:
    """What one system's build did for a dataset (the notebook prints it)."""

    system: str
    users: int = 0
    built: int = 0  # by this run
    resumed: int = 0  # finished by an earlier run with the same settings: skipped
    failed: dict[str, str] = field(default_factory=dict)  # user -> reason (retried on resume)
    wall_s: float = 0.0

    def line(self) -> str:
        failed = f", {len(self.failed)} FAILED (rerun to retry them)" if self.failed else ""
        return (
            f"{self.system}: {self.users} users, {self.built} built, {self.resumed} resumed"
            f"{failed} in {self.wall_s:.1f} s"
        )


class MemorySystem(ABC):
    """One memory architecture over one dataset folder of a run."""

    name: ClassVar[str]  # the registered name, e.g. "rag"
    answers_as: ClassVar[str]  # the system name of its answers and ledger records
    defaults: ClassVar[Mapping[str, Any]] = {}  # its settings and their defaults
    describes: ClassVar[str] = ""  # one line for tables and the report
    # What the pre-run estimate (memcost.costs.estimate) assumes it writes: model passes over
    # the history at the extraction model's price, and whether an update phase follows (the
    # paper's Mem0 is one pass and an update phase; its measured write cost is the unit).
    write_passes: ClassVar[float] = 1.0
    write_update_phase: ClassVar[bool] = True
    write_model_setting: ClassVar[str] = "extraction_model"  # the setting naming that model

    def __init__(
        self, ds: DatasetPaths, settings: Mapping[str, Any] | None = None, *, dataset: str
    ):
        unknown = sorted(set(settings or {}) - set(self.defaults))
        if unknown:
            raise ValueError(
                f"memory system {self.name}: unknown setting(s) {unknown}; its "
                f"settings are {', '.join(self.defaults) or 'none'}"
            )
        self.ds = ds
        self.dataset = dataset
        self.settings = {**self.defaults, **(settings or {})}

    @abstractmethod
    def build(self, client: LLMClient, conversations: pd.DataFrame) -> SystemBuild:
        """Ingest every user's conversation not built yet with these settings (resumable)."""

    @abstractmethod
    def recall(self, client: LLMClient, questions: pd.DataFrame) -> dict[str, Recall]:
        """Each question's recall, by question id, in the order the questions were asked."""

    @abstractmethod
    def state(self) -> pd.DataFrame:
        """One row per built user: ``conversation_id, items, tokens, calls``."""

    def items(self, user: str) -> pd.DataFrame:
        """What the system stores for ``user`` (at least ``kind``, ``text``, ``tokens``,
        ``valid``): the notebooks show it."""
        return store_items(self, user)

    @property
    @abstractmethod
    def memory_files(self) -> list[Path]:
        """The files a rebuilt memory changes (answers made from an older one are redone)."""

    def live(self, user: str) -> Any:
        """``user``'s memory served turn by turn (:class:`memcost.systems.live.LiveMemory`),
        for the serving study; ``ValueError`` for a system that has no such mode."""
        raise ValueError(f"memory system {self.name} cannot be served turn by turn")

    @classmethod
    def check_available(cls) -> None:
        """Raise ``ValueError`` in one line when the system cannot run here (a library that is
        missing or of an unsupported version); checked before a run starts."""
        return None  # the systems of this repository need nothing beyond its own packages

    def tags(self, user: str, **extra: Any) -> dict[str, Any]:
        """The ledger tags of one of this system's calls."""
        return {
            "dataset": self.dataset,
            "conversation_id": user,
            "question_id": None,
            "system": self.answers_as,
            **extra,
        }


def store_items(system: MemorySystem, user: str) -> pd.DataFrame:
    """A user's items from the system's own folder (:mod:`memcost.systems.store`)."""
    return read_user(system_dir(system.ds, system.name), user)[0]


# Filled as the system modules are imported (memcost.systems imports this package's own).
_REGISTRY: dict[str, type[MemorySystem]] = {}


def register(cls: type[MemorySystem]) -> type[MemorySystem]:
    """Class decorator: make ``cls`` available by its ``name``."""
    if cls.name in _REGISTRY and _REGISTRY[cls.name] is not cls:
        raise ValueError(f"two memory systems named {cls.name!r}")
    _REGISTRY[cls.name] = cls
    return cls


def system_names() -> tuple[str, ...]:
    """The registered systems, the paper's first."""
    return tuple(sorted(_REGISTRY, key=lambda n: (n != "mem0_style", n)))


def system_class(name: str) -> type[MemorySystem]:
    """The system registered as ``name``; ``ValueError`` in one line listing the known ones."""
    if name not in _REGISTRY:
        raise ValueError(
            f"unknown memory system {name!r}; the memory systems are {', '.join(system_names())}"
        )
    return _REGISTRY[name]


def open_system(
    name: str, ds: DatasetPaths, *, dataset: str, settings: Mapping[str, Any] | None = None
) -> MemorySystem:
    return system_class(name)(ds, settings, dataset=dataset)


def parse_systems(value: Any) -> list[tuple[str, dict[str, Any]]]:
    """``memory_systems`` as ``[(name, settings), ...]``: each entry a name (``rag``) or a
    one-key mapping of a name to its settings (``{hierarchical: {window_turns: 20}}``).
    ``ValueError`` in one line for an unknown name or setting, or a name given twice."""
    if not isinstance(value, list | tuple) or not value:
        raise ValueError(
            f"memory_systems={value!r}: expected a list of system names, e.g. "
            f"[mem0_style, rag]; the memory systems are {', '.join(system_names())}"
        )
    out: list[tuple[str, dict[str, Any]]] = []
    for entry in value:
        if isinstance(entry, Mapping) and len(entry) == 1:
            name, settings = next(iter(entry.items()))
        elif isinstance(entry, str):
            name, settings = entry, {}
        else:
            raise ValueError(
                f"memory_systems entry {entry!r}: expected a name or {{name: {{setting: value}}}}"
            )
        cls = system_class(str(name))
        cls.check_available()
        if not isinstance(settings, Mapping):
            raise ValueError(f"memory_systems {name}: settings must be a mapping, not {settings!r}")
        unknown = sorted(set(settings) - set(cls.defaults))
        if unknown:
            raise ValueError(
                f"memory system {name}: unknown setting(s) {unknown}; its "
                f"settings are {', '.join(cls.defaults)}"
            )
        if any(n == name for n, _ in out):
            raise ValueError(f"memory_systems names {name} twice")
        out.append((str(name), dict(settings)))
    return out
