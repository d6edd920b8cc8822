"""One user's memory served turn by turn (the serving study's mode): the messages it reads, where it
sends its calls, what one message did."""

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
        """``[8 May 2023] Maya: text`` (the date where the dataset gives one)."""
        day = day_text(self.session_datetime)
        return f"[{day}] {self.speaker}: {self.text}" if day else f"{self.speaker}: {self.text}"


def user_lines(turns: pd.DataFrame) -> list[HistoryLine]:
    """A user's messages in order, system messages left out, long ones whole."""
    segments, _ = segment_conversation(turns, batch_size=10_000, max_chars=10**9)
    return [
        HistoryLine(m.position, m.speaker, m.text, s.session_index, s.session_datetime)
        for s in segments
        for m in s.messages
    ]


class Calls(Protocol):
    """Where a live memory sends its model calls."""

    def chat(
        self,
        request: ChatRequest,
        offline: Callable[[ChatRequest], str],
        parse: Callable[[str], Any] | None = None,
        *,
        stage: str,
    ) -> CallResult:
        """``request`` answered; ``stage``: its serving stage (ingest_extract, ingest_update,
        observer, reflector)."""

    def embed(self, texts: list[str], *, model: str, tags: Mapping[str, Any]) -> np.ndarray: ...


def fact_line(text: str) -> str:
    return f"- {text}\n"


class Shown(NamedTuple):
    text: str
    line: str  # as the prompt shows it, newline-terminated
    tokens: int  # of the line


@dataclass(frozen=True)
class IngestCall:
    stage: str  # ingest_extract | ingest_update | observer | reflector
    result: CallResult


@dataclass
class Ingest:
    """What one message did: the gates that fired and why, their calls, the tokens embedded."""

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
        """Take the next message; run the ingest its gate asks for."""

    @abstractmethod
    def state(self) -> dict[str, int]:
        """``memory_items``, ``memory_tokens`` and ``pending_tokens`` (not processed yet)."""

    def close(self) -> None:
        return None
