"""Step 2 of the memory (study §2; paper §3.1): one extraction call per segment.

The call turns the people's own messages into atomic, self-contained facts (JSON); each fact
cites the numbered messages it came from, which become its provenance (conversation, session,
session date, speaker, turns). The offline stand-in is :mod:`memcost.offline.extract`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from memcost.catalog import generation_params
from memcost.llm import ChatRequest
from memcost.llm.requests import parse_json_object
from memcost.memory.segment import Segment
from memcost.offline.extract import capitalise, person_name
from memcost.paper import EXTRACTION_MODEL
from memcost.prompts import MEMORY_EXTRACT
from memcost.text import spoken_datetime

NO_DATES = "unknown (this conversation has no dates)"


def describe_people(people: Sequence[str]) -> str:
    """Who the facts are about, for the prompt."""
    names = [person_name(p) for p in people]
    if not names:
        return "nobody (there are no messages from a person here)"
    if names == ["the user"]:
        return 'the user (call them "the user"); the assistant\'s messages are context only'
    listed = " and ".join([", ".join(names[:-1]), names[-1]] if len(names) > 1 else names)
    return f"{listed}, each a person: record facts about each of them, by name"


def render_segment(segment: Segment) -> str:
    """The numbered message lines of the extraction prompt."""
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
    """The extraction call for one segment (``payload``: the segment, for the offline method)."""
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
        payload=segment,
        tags={
            "dataset": dataset,
            "conversation_id": segment.conversation_id,
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
    """The facts of an extraction reply: ``[{"text", "speaker", "turns"}]``.

    Raises ``ValueError`` (the client then re-asks) when the reply is not a JSON object with a
    ``facts`` list. Items that are bare strings are accepted as facts without provenance;
    items without text are skipped.
    """
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
    """The speaker of one extracted fact and the person's messages it came from."""
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
    """Attach provenance to extracted facts.

    The turns a fact cites are kept if they are the person's messages in this segment; a fact
    citing none is attributed to its speaker's messages in the segment (or all the people's).
    """
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
