"""The memory-system interface: what every memory the study compares does, found by name
(docs/adding-a-memory-system.md)."""

from __future__ import annotations

import sys
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import pandas as pd

from memcost.answers import MEMORY_SYSTEM_RE
from memcost.calls import BUILD_STAGES
from memcost.io import read_json
from memcost.llm import LLMClient
from memcost.paper import MEASURED, PAPER_SETTINGS
from memcost.paths import DatasetPaths
from memcost.plugins import contributed

# The most items a search asks a memory for (the paper's top_k is 20): results are held for a
# whole batch of questions at once, and top_k=10^8 took 5.8 GB before the kernel died.
MAX_SEARCHED = 10_000
SEARCH_SIZES = ("top_k", "update_top_k", "ef_search")

# paper §4.2: 1,046 retrieved tokens a question at top-k = 20, so 52.3 tokens a retrieved item;
# the estimate sizes every system's items so unless it knows better
TOKENS_PER_RETRIEVED_ITEM = MEASURED["read_retrieved_tokens_per_question"] / float(
    PAPER_SETTINGS["02_answer_from_memory"]["top_k"]  # type: ignore[arg-type]
)

# The columns of a recall's items (and of every system's stored items): what the reader shows.
ITEM_COLUMNS = ("item_id", "kind", "text", "session_datetime", "score", "tokens", "positions")


@dataclass(frozen=True)
class Recall:
    """What a system brings back for one question: items best first, and the search's time."""

    items: pd.DataFrame  # ITEM_COLUMNS, best first
    latency_s: float  # the search alone (the question's embedding is the client's, recorded)
    details: Mapping[str, Any] = field(default_factory=dict)  # the system's own answer fields

    @property
    def texts(self) -> list[str]:
        return self.items["text"].tolist()

    @property
    def tokens(self) -> int:
        return int(self.items["tokens"].sum()) if len(self.items) else 0

    @property
    def facts(self) -> pd.DataFrame:
        return self.items


@dataclass
class SystemBuild:
    system: str
    users: int = 0
    built: int = 0  # by this run
    resumed: int = 0  # finished by an earlier run with the same settings: skipped
    failed: dict[str, str] = field(default_factory=dict)  # user -> reason (retried on resume)
    wall_s: float = 0.0
    details: dict[str, int] = field(default_factory=dict)  # the system's own counts

    def line(self) -> str:
        failed = f", {len(self.failed)} FAILED (rerun to retry them)" if self.failed else ""
        details = "".join(f", {v} {k.replace('_', ' ')}" for k, v in self.details.items())
        return (
            f"{self.system}: {self.users} users, {self.built} built, {self.resumed} resumed"
            f"{failed}{details} in {self.wall_s:.1f} s"
        )


class MemorySystem(ABC):
    """One memory architecture over one dataset folder of a run."""

    name: ClassVar[str]  # the registered name, e.g. "rag"
    answers_as: ClassVar[str]  # the system name of its answers and ledger records
    defaults: ClassVar[Mapping[str, Any]] = {}  # its settings and their defaults
    describes: ClassVar[str] = ""  # what it is, in one line
    # The notebooks' parameters that set its settings (the paper's memory is configured by
    # notebook 01's and 02's parameters cells; the other systems by their memory_systems entry)
    parameters: ClassVar[tuple[str, ...]] = ()
    # What the pre-run estimate (memcost.costs.estimate) assumes it writes: model passes over
    # the history at the extraction model's price, and whether an update phase follows (the
    # paper's Mem0 is one pass and an update phase; its measured write cost is the unit).
    write_passes: ClassVar[float] = 1.0
    write_update_phase: ClassVar[bool] = True
    write_model_setting: ClassVar[str] = "extraction_model"  # the setting naming that model
    # The ledger stages whose calls it makes one after another, each waiting for the one
    # before (a summary of the summary, the facts the last update left): in the Batch API each
    # would be a batch of its own, so the run refuses ``batch`` for them (:meth:`in_turn`)
    stages_in_turn: ClassVar[tuple[str, ...]] = ()
    users_at_once: ClassVar[int | None] = None  # users it builds side by side (None: all)

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

    @classmethod
    def settings_from(
        cls, given: Mapping[str, Any], parameters: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        """The ``memory_systems`` entry's settings (``given``) over the notebook ``parameters`` it
        reads, over the run's models, over its defaults: a run on other models never sends a
        system's calls to the paper's."""
        parameters = parameters or {}
        run_models = {
            cls.write_model_setting: "extraction_model",
            "embedding_model": "embedding_model",
        }
        inherited = {
            setting: parameters[name]
            for setting, name in run_models.items()
            if setting in cls.defaults and name in parameters
        }
        from_parameters = {k: parameters[k] for k in cls.parameters if k in parameters}
        return {**cls.defaults, **inherited, **from_parameters, **given}

    @classmethod
    def in_turn(cls, settings: Mapping[str, Any]) -> tuple[str, ...]:
        return cls.stages_in_turn

    @classmethod
    def read_context_tokens(
        cls, settings: Mapping[str, Any], history_tokens: float, turn_tokens: float
    ) -> float | None:
        """The memory the reader sees per question, as the pre-run estimate sizes it (``None``: not
        known before the run)."""
        return None

    @classmethod
    def read_shared_tokens(
        cls, settings: Mapping[str, Any], history_tokens: float, turn_tokens: float
    ) -> float:
        """The part of it every question of a user sees first (served by a prompt cache from the
        second question on)."""
        return 0.0

    @classmethod
    def write_calls(
        cls, settings: Mapping[str, Any], stats: pd.DataFrame, segments: int
    ) -> tuple[int, float]:
        """The calls writing the memory makes and the share of the history they read, as the pre-run
        estimate counts them (by default one per segment)."""
        return segments, 1.0

    @abstractmethod
    def build(self, client: LLMClient, conversations: pd.DataFrame) -> SystemBuild:
        """Ingest every user not built yet with these settings (resumable)."""

    @abstractmethod
    def recall(self, client: LLMClient, questions: pd.DataFrame) -> dict[str, Recall]:
        """Each question's recall by question id, in the order asked."""

    @abstractmethod
    def state(self) -> pd.DataFrame:
        """One row per built user: ``conversation_id, items, tokens, calls``."""

    @abstractmethod
    def items(self, user: str) -> pd.DataFrame:
        """What the system stores for ``user`` (at least ``kind``, ``text``, ``tokens``,
        ``valid``)."""

    @property
    @abstractmethod
    def memory_files(self) -> list[Path]:
        """The files a rebuilt memory changes (answers made from an older one are redone)."""

    def live(self, user: str) -> Any:
        """``user``'s memory served turn by turn (a plugin's live memory, for the serving study)."""
        raise ValueError(f"memory system {self.name} cannot be served turn by turn")

    @classmethod
    def uses_run_server(cls, settings: Mapping[str, Any]) -> bool:
        """Does it keep its memory in the run's private database server?"""
        return False

    @classmethod
    def check_available(cls) -> None:
        """``ValueError`` in one line when the system cannot run here (checked before a run)."""
        return None  # the systems of this repository need nothing beyond its own packages

    def close(self) -> None:
        return None

    def tags(self, user: str, **extra: Any) -> dict[str, Any]:
        return {
            "dataset": self.dataset,
            "conversation_id": user,
            "question_id": None,
            "system": self.answers_as,
            **extra,
        }


def rows_by_user(users: Iterable[Any]) -> dict[str, list[int]]:
    """The positions of each user in ``users``, users in the order they first appear."""
    rows: dict[str, list[int]] = {}
    for i, user in enumerate(users):
        rows.setdefault(str(user), []).append(i)
    return rows


# Every system by name: the core's (memcost.memory imports mem0_style), each plugin's (on the
# first look-up) and any a session registers itself
_REGISTRY: dict[str, type[MemorySystem]] = {}
_PLUGINS_LOADED = False


def register(cls: type[MemorySystem]) -> type[MemorySystem]:
    """Class decorator: ``cls`` by its ``name`` in this process (a plugin's are registered in every
    process)."""
    if cls.name in _REGISTRY and _REGISTRY[cls.name] is not cls:
        raise ValueError(f"two memory systems named {cls.name!r}")
    answers_as = getattr(cls, "answers_as", None)
    if not MEMORY_SYSTEM_RE.match(answers_as or ""):
        raise ValueError(
            f"memory system {cls.name!r}: answers_as must be 'memory_' and lower-case letters, "
            f"digits and underscores (e.g. 'memory_{cls.name}'), not {answers_as!r}"
        )
    _REGISTRY[cls.name] = cls
    return cls


def _registry() -> dict[str, type[MemorySystem]]:
    global _PLUGINS_LOADED
    if not _PLUGINS_LOADED:
        _PLUGINS_LOADED = True
        for cls in contributed("memory_systems"):
            register(cls)
    return _REGISTRY


def system_names() -> tuple[str, ...]:
    return tuple(sorted(_registry(), key=lambda n: (n != "mem0_style", n)))


def system_class(name: str) -> type[MemorySystem]:
    if name not in _registry():
        raise ValueError(
            f"unknown memory system {name!r}; the memory systems are {', '.join(system_names())}"
        )
    return _REGISTRY[name]


def open_system(
    name: str, ds: DatasetPaths, *, dataset: str, settings: Mapping[str, Any] | None = None
) -> MemorySystem:
    return system_class(name)(ds, settings, dataset=dataset)


def open_systems(
    value: Any, ds: DatasetPaths, *, dataset: str, parameters: Mapping[str, Any] | None = None
) -> dict[str, MemorySystem]:
    return {
        name: system_class(name)(
            ds, system_class(name).settings_from(settings, parameters), dataset=dataset
        )
        for name, settings in parse_systems(value)
    }


def parse_systems(value: Any, *, runnable: bool = True) -> list[tuple[str, dict[str, Any]]]:
    """``memory_systems`` as ``[(name, settings)]``: names (``rag``) or one-key mappings
    (``{hierarchical: {window_turns: 20}}``); ``ValueError`` in one line for an unknown name or
    setting, a repeated name, or (``runnable``) a system that cannot run here."""
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
        if runnable:
            cls.check_available()
        if not isinstance(settings, Mapping):
            raise ValueError(f"memory_systems {name}: settings must be a mapping, not {settings!r}")
        unknown = sorted(set(settings) - set(cls.defaults))
        if unknown:
            raise ValueError(
                f"memory system {name}: unknown setting(s) {unknown}; its "
                f"settings are {', '.join(cls.defaults)}"
            )
        for setting in SEARCH_SIZES:
            value = settings.get(setting)
            if value is not None and not (
                isinstance(value, int)
                and not isinstance(value, bool)
                and 1 <= value <= MAX_SEARCHED
            ):
                raise ValueError(
                    f"memory system {name}: {setting}={value!r}: expected a whole number from 1 "
                    f"to {MAX_SEARCHED}"
                )
        if any(n == name for n, _ in out):
            raise ValueError(f"memory_systems names {name} twice")
        out.append((str(name), dict(settings)))
    return out


# A system that builds user by user records its status in its folder,
# ``<ds>/memory/systems/<name>/``: ``done.json`` (``{user: {"fingerprint": ..., ...}}``) and
# ``failed.json`` (``{user: reason}``, retried by the next build); the runner counts both.
def system_dir(ds: DatasetPaths, name: str) -> Path:
    return ds.memory / "systems" / name


def read_done(folder: Path) -> dict[str, dict[str, Any]]:
    path = folder / "done.json"
    return dict(read_json(path)) if path.is_file() else {}


def read_failed(folder: Path) -> dict[str, str]:
    path = folder / "failed.json"
    return dict(read_json(path)) if path.is_file() else {}


def recorded_builds(client: LLMClient, system: str, done: Mapping[str, int]) -> list[str]:
    """The users of ``done`` (marked built, each with the chat calls its marker counts) whose
    build is in the run's store of calls: at least that many chat calls (a build that made none,
    such as RAG's, which only embeds, is taken as recorded).
    The others had their records lost (a full disk, a deleted store): they are built again, so
    that the cost tables count every memory the run shows."""
    calls = client.store.on_ledger(BUILD_STAGES, "system", "conversation_id", "stage")
    chats: Counter[str] = Counter()
    built: set[str] = set()
    for (name, user, stage), n in calls.items():
        if name == system:
            built.add(str(user))
            chats[str(user)] += n if stage != "embed" else 0
    kept = [u for u, needed in done.items() if not needed or (u in built and chats[u] >= needed)]
    if len(kept) < len(done):
        print(
            f"memcost: {len(done) - len(kept)} user(s) of {system} marked built lack build calls "
            "in the run's store of calls (their records were lost): built again, so that the cost "
            "tables count them",
            file=sys.stderr,
            flush=True,
        )
    return kept
