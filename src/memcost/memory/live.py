"""One user's memory served turn by turn (the serving study's mode, :meth:`MemorySystem.live`):
the messages it reads, where it sends its calls, and what one message did."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

import numpy as np
import pandas as pd

from memcost.llm import CallResult, ChatRequest
from memcost.memory.segments import segment_conversation
from memcost.text import day_text


@dataclass(frozen=True)
class HistoryLine:
    """One message of a user's history, in order, as the systems read it."""

    position: int
    speaker: str
    text: str
    session_index: int
    session_datetime: str | None

    def render(self) -> str:
        """``[8 May 2023] Maya: text`` (the date only where the dataset gives one)."""
        day = day_text(self.session_datetime)
        return f"[{day}] {self.speaker}: {self.text}" if day else f"{self.speaker}: {self.text}"


def user_lines(turns: pd.DataFrame) -> list[HistoryLine]:
    """A user's messages in order, system messages left out, long messages whole (the memory
    stage's segmentation, read back as a stream)."""
    segments, _ = segment_conversation(turns, batch_size=10_000, max_chars=10**9)
    return [
        HistoryLine(m.position, m.speaker, m.text, s.session_index, s.session_datetime)
        for s in segments
        for m in s.messages
    ]


class Calls(Protocol):
    """Where a live memory sends its model calls (both return what the client would)."""

    def chat(
        self,
        request: ChatRequest,
        offline: Callable[[ChatRequest], str],
        parse: Callable[[str], Any] | None = None,
        *,
        stage: str,
    ) -> CallResult:
        """``request`` answered (``offline`` without a key); ``stage``: the serving stage the
        call is (ingest_extract, ingest_update, observer, reflector), its ledger tag."""

    def embed(self, texts: list[str], *, model: str, tags: Mapping[str, Any]) -> np.ndarray:
        """``(len(texts), d)`` unit rows."""


def fact_line(text: str) -> str:
    """An item as a live recall shows it: one ``- text`` line."""
    return f"- {text}\n"


class Shown(NamedTuple):
    """One item a recall shows with the message."""

    text: str
    line: str  # as the prompt shows it, newline-terminated
    tokens: int  # of the line


@dataclass(frozen=True)
class IngestCall:
    """One model call of an ingest: its serving stage and what came back."""

    stage: str  # ingest_extract | ingest_update | observer | reflector
    result: CallResult


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

    def close(self) -> None:
        """Let go of what the memory holds outside this process (a server's bank)."""
        return None
