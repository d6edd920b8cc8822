"""Answering from memory, step 2: the reader's request.

The reader model gets the retrieved facts in order of similarity, each with the date of the
conversation it came from (unless the fact already states it), plus the question and the date
it is asked. The offline stand-in is :mod:`memcost.offline.reader`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

import pandas as pd

from memcost import answers
from memcost.catalog import generation_params
from memcost.llm import ChatRequest
from memcost.paper import READER_MODEL
from memcost.prompts import MEMORY_READ
from memcost.retrieval.search import SYSTEM
from memcost.text import day_text, spoken_datetime


class Memories(Protocol):
    """What the reader reads of a search: the items (``text``, ``session_datetime``), best
    first, and their texts (a :class:`~memcost.retrieval.search.Retrieved`, or any memory
    system's recall)."""

    @property
    def facts(self) -> pd.DataFrame: ...

    @property
    def texts(self) -> list[str]: ...


def render_memories(facts: pd.DataFrame) -> str:
    """The reader's memory block: one line per fact, ``- [8 May 2023] <fact>``; a fact that
    already states its conversation's date (as the offline extractor writes them) is not
    marked twice."""
    if facts.empty:
        return "(no memories stored)"
    lines = []
    for text, when in zip(facts["text"], facts["session_datetime"], strict=True):
        day = day_text(when if isinstance(when, str) else None)
        lines.append(f"- [{day}] {text}" if day and day not in text else f"- {text}")
    return "\n".join(lines)


def shown_options(question: Mapping[str, Any], mode: str) -> answers.MultipleChoice | None:
    """The options the reader is shown (multiple-choice mode and a question that has them)."""
    if mode not in answers.MODES:
        raise ValueError(f"mode must be one of {answers.MODES}, got {mode!r}")
    options = question.get("options")
    if mode != "multiple_choice" or options is None or not len(options):
        return None
    return answers.multiple_choice(str(question["question_id"]), [str(o) for o in options])


def reader_request(
    question: Mapping[str, Any],
    retrieved: Memories,
    *,
    dataset: str,
    model: str = READER_MODEL,
    reasoning_effort: str = "medium",
    mode: str = "open_ended",
    system: str = SYSTEM,
) -> ChatRequest:
    """The reader call for one question (``payload`` feeds the offline reader); ``system`` is
    the memory system whose items it reads (:mod:`memcost.systems`; the paper's: ``memory``).

    In ``multiple_choice`` mode a question with options (PersonaMem) lists them in the order
    :func:`memcost.answers.multiple_choice` fixes and asks for a letter, as the judge expects.
    """
    asked = question.get("question_date")
    date_line = (
        f"Question date: {spoken_datetime(asked)}\n" if isinstance(asked, str) and asked else ""
    )
    text = str(question["question"])
    shown = shown_options(question, mode)
    if shown is not None:
        text += f"\n\nOptions:\n{shown.render()}\n{answers.MC_ANSWER_INSTRUCTION}"
    return ChatRequest(
        model=model,
        messages=MEMORY_READ.messages(
            memories=render_memories(retrieved.facts),
            date_line=date_line,
            question=text,
        ),
        stage="read",
        prompt_version=MEMORY_READ.id,
        payload={
            "question": str(question["question"]),
            "facts": retrieved.texts,
            "options": list(shown.options) if shown is not None else None,
        },
        tags={
            "dataset": dataset,
            "conversation_id": str(question["conversation_id"]),
            "question_id": str(question["question_id"]),
            "system": system,
        },
        **generation_params(model, reasoning_effort),
    )
