"""Step 1 of the memory (study §2; paper §3.1): cut a conversation into extraction segments.

The turns, session by session in chronological order, are cut into segments of at most
``batch_size`` messages and ``max_segment_chars`` characters of content. A segment never spans
two sessions (each session has its own date, which the extractor needs to resolve
"yesterday"). A message longer than the limit is split into parts: recorded, never cut.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from memcost.memory.facts import SEGMENT_SCHEMA, SPLIT_SCHEMA
from memcost.text import with_caption

BATCH_SIZE = 10  # §3.1: messages per extraction segment
MAX_SEGMENT_CHARS = 8_000  # §3.1: characters of content per segment at most
PERSON_ROLE = "user"  # whose messages facts come from (both LoCoMo speakers are "user")


@dataclass(frozen=True)
class Message:
    """One message (or one part of a split message) as a segment shows it to the extractor."""

    number: int  # 1-based within the segment: what the prompt shows and the model cites
    position: int  # the turn's position in the conversation
    speaker: str
    role: str
    text: str  # the content (with a shared photo's caption), or one part of it
    dia_id: str | None = None
    has_answer: bool | None = None
    part: int = 0  # 0-based part of a split message
    parts: int = 1

    @property
    def is_person(self) -> bool:
        return self.role == PERSON_ROLE


@dataclass(frozen=True)
class Segment:
    """Consecutive messages of one session: the unit of one extraction call."""

    conversation_id: str
    index: int  # 0-based within the conversation, chronological
    session_index: int
    session_id: str | None
    session_datetime: str | None  # ISO 8601, the dataset's own session date (never "today")
    messages: tuple[Message, ...]
    people: tuple[str, ...]  # the conversation's person speakers, for the prompt

    @property
    def chars(self) -> int:
        return sum(len(m.text) for m in self.messages)

    @property
    def person_messages(self) -> tuple[Message, ...]:
        return tuple(m for m in self.messages if m.is_person)


@dataclass(frozen=True)
class SplitMessage:
    """A message longer than a segment may hold, split into ``parts`` (nothing dropped)."""

    conversation_id: str
    position: int
    chars: int
    parts: int


@dataclass
class UserPlan:
    """One user's segments and split messages, before any model call."""

    user: str
    segments: list[Segment]
    splits: list[SplitMessage]


def split_text(text: str, max_chars: int) -> list[str]:
    """Parts of at most ``max_chars`` characters whose concatenation is ``text`` exactly.

    Cuts after a sentence end or a line break when one is in the second half of the window,
    else at the last space there, else hard at ``max_chars``.
    """
    if max_chars <= 0:
        raise ValueError("max_chars must be positive")
    parts: list[str] = []
    rest = text
    while len(rest) > max_chars:
        window = rest[:max_chars]
        floor = max_chars // 2
        cut = max(
            (m.end() for m in re.finditer(r"[.!?]\s+|\n", window) if m.end() > floor), default=0
        )
        if not cut:
            space = window.rfind(" ")
            cut = space + 1 if space >= floor else max_chars
        parts.append(rest[:cut])
        rest = rest[cut:]
    parts.append(rest)
    return parts


def message_content(text: str, caption: Any) -> str:
    """A turn's text with its shared photo described, as the long-context prompt shows it."""
    return with_caption(text, caption)


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _bool_or_none(value: Any) -> bool | None:
    if value is None or value is pd.NA or (isinstance(value, float) and np.isnan(value)):
        return None
    return bool(value)


def _turn_rows(ordered: pd.DataFrame) -> zip:
    """The columns a segment needs, row by row (optional columns as ``None``)."""
    blank = [None] * len(ordered)
    return zip(
        ordered["session_index"].tolist(),
        ordered["session_id"].tolist(),
        ordered["session_datetime"].tolist(),
        ordered["position"].tolist(),
        ordered["speaker"].tolist(),
        ordered["role"].tolist(),
        ordered["text"].tolist(),
        list(ordered["dia_id"]) if "dia_id" in ordered else blank,
        list(ordered["has_answer"]) if "has_answer" in ordered else blank,
        list(ordered["image_caption"]) if "image_caption" in ordered else blank,
        strict=True,
    )


class _Cutter:
    """Accumulates messages into segments, closing one at a session change or a limit."""

    def __init__(
        self, conversation_id: str, people: tuple[str, ...], batch_size: int, max_chars: int
    ):
        self.conversation_id, self.people = conversation_id, people
        self.batch_size, self.max_chars = batch_size, max_chars
        self.segments: list[Segment] = []
        self.current: list[Message] = []
        self.chars = 0
        self.key: tuple[Any, ...] | None = None

    def close(self) -> None:
        if self.current and self.key is not None:
            self.segments.append(
                Segment(
                    self.conversation_id,
                    len(self.segments),
                    self.key[0],
                    self.key[1],
                    self.key[2],
                    tuple(self.current),
                    self.people,
                )
            )
        self.current, self.chars = [], 0

    def session(self, key: tuple[Any, ...]) -> None:
        if key != self.key:
            self.close()
            self.key = key

    def add(self, piece: str, **fields: Any) -> None:
        if self.current and (
            len(self.current) >= self.batch_size or self.chars + len(piece) > self.max_chars
        ):
            self.close()
        self.current.append(Message(len(self.current) + 1, text=piece, **fields))
        self.chars += len(piece)


def segment_conversation(
    turns: pd.DataFrame,
    *,
    batch_size: int = BATCH_SIZE,
    max_chars: int = MAX_SEGMENT_CHARS,
) -> tuple[list[Segment], list[SplitMessage]]:
    """Cut one conversation (rows of ``conversations.parquet``) into extraction segments.

    Segments never span two sessions (each session has its own date, which the extractor needs
    to resolve "yesterday"). System messages (PersonaMem's persona preamble) are left out:
    they describe the persona to a model, they are not the person speaking.
    """
    if batch_size < 1 or max_chars < 1:
        raise ValueError("batch_size and max_chars must be positive")
    if turns.empty:
        return [], []
    ordered = turns.sort_values("position", kind="stable")
    conversation_id = str(ordered["conversation_id"].iloc[0])
    people = tuple(
        dict.fromkeys(
            str(s)
            for s, r in zip(ordered["speaker"], ordered["role"], strict=True)
            if r == PERSON_ROLE
        )
    )
    cutter = _Cutter(conversation_id, people, batch_size, max_chars)
    splits: list[SplitMessage] = []
    for session, session_id, when, position, speaker, role, text, dia, flag, caption in _turn_rows(
        ordered
    ):
        if role == "system":
            continue
        content = message_content(str(text), caption)
        if not content.strip():
            continue
        cutter.session((int(session), _str_or_none(session_id), _str_or_none(when)))
        pieces = split_text(content, max_chars)
        if len(pieces) > 1:
            splits.append(SplitMessage(conversation_id, int(position), len(content), len(pieces)))
        for part, piece in enumerate(pieces):
            cutter.add(
                piece,
                position=int(position),
                speaker=str(speaker),
                role=str(role),
                dia_id=_str_or_none(dia),
                has_answer=_bool_or_none(flag),
                part=part,
                parts=len(pieces),
            )
    cutter.close()
    return cutter.segments, splits


def plan_users(
    conversations: pd.DataFrame,
    users: list[str] | tuple[str, ...],
    *,
    batch_size: int = BATCH_SIZE,
    max_chars: int = MAX_SEGMENT_CHARS,
) -> dict[str, UserPlan]:
    """Segments for every user, in ``users`` order (a user without turns has none)."""
    groups = {str(k): g for k, g in conversations.groupby("conversation_id", sort=False)}
    plans = {}
    for user in users:
        turns = groups.get(user)
        segments, splits = (
            segment_conversation(turns, batch_size=batch_size, max_chars=max_chars)
            if turns is not None
            else ([], [])
        )
        plans[user] = UserPlan(user, segments, splits)
    return plans


def segment_row(seg: Segment, *, status: str, candidates: int, error: str | None) -> dict:
    """A segment as a row of ``segments.parquet`` (:data:`SEGMENT_SCHEMA`)."""
    return {
        "conversation_id": seg.conversation_id,
        "segment_index": seg.index,
        "session_index": seg.session_index,
        "session_id": seg.session_id,
        "session_datetime": seg.session_datetime,
        "messages": len(seg.messages),
        "person_messages": len(seg.person_messages),
        "chars": seg.chars,
        "position_start": seg.messages[0].position,
        "position_end": seg.messages[-1].position,
        "split_parts": sum(1 for m in seg.messages if m.parts > 1),
        "status": status,
        "candidates": candidates,
        "error": error,
    }


def segments_table(plans: Mapping[str, UserPlan]) -> pd.DataFrame:
    """One row per planned segment (before extraction): the segmentation at a glance."""
    rows = [
        segment_row(seg, status="planned", candidates=0, error=None)
        for plan in plans.values()
        for seg in plan.segments
    ]
    return pa.Table.from_pylist(rows, schema=SEGMENT_SCHEMA).to_pandas()


def split_rows(plans: Mapping[str, UserPlan]) -> list[dict[str, Any]]:
    """The split messages of every plan, as rows of ``splits.parquet``."""
    return [asdict(s) for plan in plans.values() for s in plan.splits]


def splits_table(plans: Mapping[str, UserPlan]) -> pd.DataFrame:
    return pa.Table.from_pylist(split_rows(plans), schema=SPLIT_SCHEMA).to_pandas()
