"""The paper's memory, steps 1 and 2 (paper §3.1): segments, and one extraction call each with the
facts' provenance."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from memcost.catalog import generation_params
from memcost.llm import ChatRequest
from memcost.llm.requests import parse_json_object
from memcost.memory.facts import SEGMENT_SCHEMA, SPLIT_SCHEMA
from memcost.memory.search import SYSTEM
from memcost.offline import capitalise, person_name
from memcost.paper import EXTRACTION_MODEL
from memcost.prompts import MEMORY_EXTRACT
from memcost.text import spoken_datetime, with_caption

BATCH_SIZE = 10  # §3.1: messages per extraction segment
MAX_SEGMENT_CHARS = 8_000  # §3.1: characters of content per segment at most
PERSON_ROLE = "user"  # whose messages facts come from (both LoCoMo speakers are "user")


@dataclass(frozen=True)
class Message:
    """One message (or part) as a segment shows it to the extractor."""

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
    """Consecutive messages of one session: one extraction call."""

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
    conversation_id: str
    position: int
    chars: int
    parts: int


@dataclass
class UserPlan:
    user: str
    segments: list[Segment]
    splits: list[SplitMessage]


def split_text(text: str, max_chars: int) -> list[str]:
    """Parts of at most ``max_chars`` that concatenate to ``text``: cut after a sentence end or line
    break in the window's second half, else at its last space, else hard."""
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
    return with_caption(text, caption)


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _bool_or_none(value: Any) -> bool | None:
    if value is None or value is pd.NA or (isinstance(value, float) and np.isnan(value)):
        return None
    return bool(value)


def _turn_rows(ordered: pd.DataFrame) -> zip:
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
    """Cut one conversation into extraction segments (never across sessions; system messages left
    out)."""
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
    """One row per planned segment, before extraction."""
    rows = [
        segment_row(seg, status="planned", candidates=0, error=None)
        for plan in plans.values()
        for seg in plan.segments
    ]
    return pa.Table.from_pylist(rows, schema=SEGMENT_SCHEMA).to_pandas()


def split_rows(plans: Mapping[str, UserPlan]) -> list[dict[str, Any]]:
    return [asdict(s) for plan in plans.values() for s in plan.splits]


def splits_table(plans: Mapping[str, UserPlan]) -> pd.DataFrame:
    return pa.Table.from_pylist(split_rows(plans), schema=SPLIT_SCHEMA).to_pandas()


NO_DATES = "unknown (this conversation has no dates)"


def describe_people(people: Sequence[str]) -> str:
    names = [person_name(p) for p in people]
    if not names:
        return "nobody (there are no messages from a person here)"
    if names == ["the user"]:
        return 'the user (call them "the user"); the assistant\'s messages are context only'
    listed = " and ".join([", ".join(names[:-1]), names[-1]] if len(names) > 1 else names)
    return f"{listed}, each a person: record facts about each of them, by name"


def render_segment(segment: Segment) -> str:
    lines = []
    for m in segment.messages:
        who = capitalise(person_name(m.speaker)) if m.is_person else capitalise(m.speaker)
        part = f" (part {m.part + 1} of {m.parts})" if m.parts > 1 else ""
        lines.append(f"[{m.number}] {who}{part}: {m.text}")
    return "\n".join(lines)


def extraction_request(
    segment: Segment,
    *,
    dataset: str,
    model: str = EXTRACTION_MODEL,
    reasoning_effort: str = "low",
) -> ChatRequest:
    """The extraction call for one segment (``payload``: the segment)."""
    messages = MEMORY_EXTRACT.messages(
        session_date=spoken_datetime(segment.session_datetime, missing=NO_DATES),
        people=describe_people(segment.people),
        messages=render_segment(segment),
    )
    return ChatRequest(
        model=model,
        messages=messages,
        stage="extract",
        prompt_version=MEMORY_EXTRACT.id,
        json_mode=True,
        reply_schema=MEMORY_EXTRACT.reply_schema,
        payload=segment,
        tags={
            "dataset": dataset,
            "conversation_id": segment.conversation_id,
            "system": SYSTEM,  # the paper's memory (mem0_style)
            "segment": segment.index,
        },
        **generation_params(model, reasoning_effort),
    )


def _turn_numbers(turns: Any) -> list[int]:
    if not isinstance(turns, list):
        turns = [turns]
    numbers = []
    for t in turns:
        try:
            numbers.append(int(t))
        except (TypeError, ValueError):
            continue
    return numbers


def parse_extraction(text: str) -> list[dict[str, Any]]:
    """``[{"text", "speaker", "turns"}]`` of a reply; ``ValueError`` (re-ask) without a ``facts``
    list; bare strings are facts without provenance."""
    obj = parse_json_object(text)
    items = obj.get("facts")
    if not isinstance(items, list):
        raise ValueError('the reply has no "facts" list')
    facts = []
    for item in items:
        if isinstance(item, str):
            item = {"text": item}
        if not isinstance(item, Mapping):
            continue
        fact_text = item.get("text") or item.get("fact")
        if not isinstance(fact_text, str) or not fact_text.strip():
            continue
        speaker = item.get("speaker")
        facts.append(
            {
                "text": " ".join(fact_text.split()),
                "speaker": speaker if isinstance(speaker, str) else None,
                "turns": _turn_numbers(item.get("turns") or []),
            }
        )
    return facts


@dataclass
class Candidate:
    """A fact just extracted, before the update phase, with its provenance."""

    conversation_id: str
    segment_index: int
    candidate_index: int  # 0-based within the segment
    text: str
    speaker: str
    session_index: int
    session_id: str | None
    session_datetime: str | None
    positions: tuple[int, ...]  # the cited turns' positions in the conversation (0-based)
    dia_ids: tuple[str, ...]
    has_answer: bool | None
    backend: str
    prompt_version: str
    vector: np.ndarray | None = field(default=None, repr=False)
    numbers: tuple[int, ...] = ()  # the cited messages' numbers in the prompt (1-based)


def _match_speaker(name: str | None, people: Sequence[str]) -> str | None:
    if not name:
        return None
    wanted = name.strip().lower()
    for person in people:
        if wanted in (person.lower(), person_name(person).lower()):
            return person
    return None


def _attribute(segment: Segment, item: Mapping[str, Any]) -> tuple[str, list]:
    """An extracted fact's speaker and the person's messages it came from."""
    persons = segment.person_messages
    by_number = {m.number: m for m in persons}
    cited = [by_number[n] for n in item.get("turns", []) if n in by_number]
    speaker = _match_speaker(item.get("speaker"), segment.people)
    if speaker is None:
        speaker = (
            cited[0].speaker if cited else (segment.people[0] if len(segment.people) == 1 else None)
        )
    if not cited:
        cited = [m for m in persons if speaker is None or m.speaker == speaker] or list(persons)
    if speaker is None:
        speaker = cited[0].speaker if cited else (segment.people or ("user",))[0]
    return speaker, cited


def candidates_from(
    segment: Segment, facts: Sequence[Mapping[str, Any]], *, backend: str, prompt_version: str
) -> list[Candidate]:
    """Extracted facts with provenance: the turns they cite among the person's messages here, else
    their speaker's (or all the people's) messages in the segment."""
    out: list[Candidate] = []
    for item in facts:
        speaker, cited = _attribute(segment, item)
        flags = [m.has_answer for m in cited if m.has_answer is not None]
        out.append(
            Candidate(
                conversation_id=segment.conversation_id,
                segment_index=segment.index,
                candidate_index=len(out),
                text=str(item["text"]),
                speaker=speaker,
                session_index=segment.session_index,
                session_id=segment.session_id,
                session_datetime=segment.session_datetime,
                positions=tuple(sorted({m.position for m in cited})),
                dia_ids=tuple(dict.fromkeys(m.dia_id for m in cited if m.dia_id)),
                has_answer=any(flags) if flags else None,
                backend=backend,
                prompt_version=prompt_version,
                numbers=tuple(sorted({m.number for m in cited})),
            )
        )
    return out
