"""The long-context answerer offline (notebook 03): extractive, not a language model.

It reads what the prompt shows and nothing else, so the variants differ offline exactly as they
differ for a model: no history, a window, the evidence sessions, the whole history. The turn of
the shown history that shares the most words with the question (BM25) is quoted with its date;
with options listed it picks the option the history supports best, and with no history the
longest option, which is the known PersonaMem bias (study §10) made visible.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

from memcost import answers
from memcost.text import BM25, spoken_datetime

# The extractive method's fixed replies.
NOT_MENTIONED = "Not mentioned in the conversations."
NO_HISTORY_ANSWER = "I don't know: no past conversations are available."
UNDECIDED = "I don't know."


class HistoryTurn(NamedTuple):
    """One turn of a shown history, as the extractive method quotes it."""

    session: int  # session number as rendered (session_index + 1)
    when: str | None  # the session's ISO date
    speaker: str
    text: str  # the utterance, with a shared photo's caption


class ShownHistory(Protocol):
    """What a prompt carries between ``<history>`` and ``</history>`` (a long-context Context)."""

    @property
    def key(self) -> Hashable: ...

    @property
    def history(self) -> Any: ...  # None: the prompt says there is no history

    def turns(self) -> list[HistoryTurn]: ...


@dataclass(frozen=True)
class OfflineJob:
    """What the offline method needs (the request's ``payload``; never sent)."""

    kind: str
    question: str
    options: tuple[str, ...] | None
    context: ShownHistory


class ExtractiveAnswerer:
    """The offline method of the long-context stage: lexical overlap (BM25) between the question
    and the turns shown. One index per distinct history text, built on first use."""

    def __init__(self) -> None:
        self._indexes: dict[Hashable, tuple[list[HistoryTurn], BM25]] = {}

    def _index(self, context: ShownHistory) -> tuple[list[HistoryTurn], BM25]:
        key = context.key
        if key not in self._indexes:
            turns = context.turns()
            self._indexes[key] = (turns, BM25([t.text for t in turns]))
        return self._indexes[key]

    def __call__(self, request: Any) -> str:
        job = request.payload
        if not isinstance(job, OfflineJob):
            raise TypeError("a long-context request's payload must be an OfflineJob")
        if job.context.history is None:  # no context
            if job.options:
                return answers.format_choice(job.options, answers.longest_option(job.options))
            return NO_HISTORY_ANSWER
        turns, index = self._index(job.context)
        if job.options:
            pick = answers.best_supported_option(job.options, [t.text for t in turns])
            return UNDECIDED if pick is None else answers.format_choice(job.options, pick)
        best = index.best(job.question) if turns else None
        if best is None:
            return NOT_MENTIONED
        return quote(turns[best[0]])


def quote(turn: HistoryTurn) -> str:
    """``Speaker (Monday 8 May 2023, 13:56): text`` (the session number without a date)."""
    when = spoken_datetime(turn.when, missing=f"session {turn.session}")
    return f"{turn.speaker} ({when}): {turn.text}"


__all__ = [
    "NOT_MENTIONED",
    "NO_HISTORY_ANSWER",
    "UNDECIDED",
    "ExtractiveAnswerer",
    "OfflineJob",
    "ShownHistory",
    "HistoryTurn",
    "quote",
]
