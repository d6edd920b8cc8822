"""A memory system served turn by turn: how the serving study (notebook 06) uses this package's
systems, with no second implementation of any of them.

The main study builds a user's memory once from the whole history and then asks questions. The
serving study replays a conversation one message at a time: at each turn it asks the memory what
bears on the new message, answers, then hands the message to the memory, whose ingest gate may
fire (an extraction every ``batch_size`` messages, an observer at a token threshold). A
:class:`LiveMemory` is one user's memory in that second mode. It is made by the system itself
(:meth:`memcost.systems.base.MemorySystem.live`) from the same prompts, stand-ins, update rules
and search as its build, and it sends its calls through a :class:`Calls` (the serving engine:
the offline stand-ins, or the project's client).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

import numpy as np

from memcost.llm import ChatRequest, ChatResult
from memcost.systems.stored import HistoryLine


class Calls(Protocol):
    """Where a live memory sends its model calls (both return what the client would)."""

    def chat(
        self,
        request: ChatRequest,
        offline: Callable[[ChatRequest], str],
        parse: Callable[[str], Any] | None = None,
        *,
        stage: str,
    ) -> ChatResult:
        """``request`` answered (``offline`` without a key); ``stage``: the serving stage the
        call is (ingest_extract, ingest_update, observer, reflector), its ledger tag."""

    def embed(self, texts: list[str], *, model: str, tags: Mapping[str, Any]) -> np.ndarray:
        """``(len(texts), d)`` unit rows."""


class Shown(NamedTuple):
    """One item a recall shows with the message."""

    text: str
    line: str  # as the prompt shows it, newline-terminated
    tokens: int  # of the line


@dataclass(frozen=True)
class IngestCall:
    """One model call of an ingest: its serving stage and what came back."""

    stage: str  # ingest_extract | ingest_update | observer | reflector
    result: ChatResult


@dataclass
class Ingest:
    """What handing one message to the memory did: the gates that fired (and why), the calls
    they made, and the tokens embedded for the items they stored."""

    reasons: list[str] = field(default_factory=list)
    calls: list[IngestCall] = field(default_factory=list)
    embedded_tokens: int = 0

    @property
    def fired(self) -> bool:
        return bool(self.reasons)


class LiveMemory(ABC):
    """One user's memory, served turn by turn."""

    @abstractmethod
    def recall(self, calls: Calls, text: str) -> list[Shown]:
        """The items shown with the message ``text``, best first."""

    @abstractmethod
    def add(self, calls: Calls, line: HistoryLine) -> Ingest:
        """Take the next message; run the ingest its gate asks for, if any."""

    @abstractmethod
    def state(self) -> dict[str, int]:
        """``memory_items``, ``memory_tokens`` (what a recall can show) and ``pending_tokens``
        (message tokens the memory has not processed yet)."""
