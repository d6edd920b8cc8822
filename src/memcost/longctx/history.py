"""Histories, rendered and counted once (notebook 03, section 1).

Each conversation is rendered the way notebook 00 counted it (:func:`memcost.data.render_sessions`:
dated session headers, ``speaker: text`` turns, shared photos described) one session at a time,
and every session of every conversation is tokenised in one batched count. A prompt's size is
then the sum of the sessions it keeps: the parts end where o200k's pre-tokenizer always splits
(after a newline, before a non-space), so the sum is exactly the count of the whole.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field

import pandas as pd

from memcost import data
from memcost.offline import HistoryTurn
from memcost.text import count_tokens_batch, with_caption

# tiktoken's batch encoder returns every token id before we take the lengths, and 50M ids at
# once would need gigabytes: histories are counted a few million characters at a time.
COUNT_CHUNK_CHARS = 4_000_000


@dataclass(frozen=True)
class SessionBlock:
    """One session as it appears in a prompt: its rendering plus the separator that follows."""

    number: int  # session_index + 1, as the header says
    session_id: str
    text: str
    tokens: int  # o200k tokens of ``text``
    dia_ids: frozenset[str]  # LoCoMo turn ids in this session (evidence for the oracle)


@dataclass(eq=False)
class History:
    """One conversation, rendered session by session and counted once."""

    conversation_id: str
    sessions: tuple[SessionBlock, ...]
    turns: pd.DataFrame = field(repr=False)  # this conversation's rows, in order
    _turn_list: list[HistoryTurn] | None = field(default=None, repr=False)

    @property
    def tokens(self) -> int:
        return sum(s.tokens for s in self.sessions)

    @property
    def text(self) -> str:
        """The whole rendered history, as a prompt that keeps every session shows it."""
        return "".join(s.text for s in self.sessions)

    def turn_list(self) -> list[HistoryTurn]:
        if self._turn_list is None:
            t = self.turns
            self._turn_list = [
                HistoryTurn(
                    int(s) + 1, w if isinstance(w, str) else None, str(sp), with_caption(str(x), c)
                )
                for s, w, sp, x, c in zip(
                    t["session_index"].tolist(),
                    t["session_datetime"].tolist(),
                    t["speaker"].tolist(),
                    t["text"].tolist(),
                    t["image_caption"].tolist(),
                    strict=True,
                )
            ]
        return self._turn_list


def count_in_chunks(texts: list[str], chunk_chars: int = COUNT_CHUNK_CHARS) -> list[int]:
    """:func:`memcost.text.count_tokens_batch` over consecutive slices of at most
    ``chunk_chars`` characters (a longer single text is its own slice)."""
    counts: list[int] = []
    start = 0
    while start < len(texts):
        end, size = start, 0
        while end < len(texts) and (end == start or size + len(texts[end]) <= chunk_chars):
            size += len(texts[end])
            end += 1
        counts.extend(count_tokens_batch(texts[start:end]))
        start = end
    return counts


def rendered(turns: pd.DataFrame) -> str:
    """Turns in order, rendered session by session, each followed by the session separator."""
    return "".join(text + data.SESSION_SEPARATOR for _, text in data.render_sessions(turns))


def _ordered(frame: pd.DataFrame) -> pd.DataFrame:
    positions = frame["position"]
    if positions.is_monotonic_increasing:
        return frame
    return frame.sort_values("position", kind="stable")


def _session_ids(ordered: pd.DataFrame) -> tuple[dict[int, str], dict[int, set[str]]]:
    """Per session index: its id, and the LoCoMo turn ids (``D3:7``) it holds."""
    ids: dict[int, str] = {}
    dias: dict[int, set[str]] = defaultdict(set)
    for index, session_id, dia in zip(
        ordered["session_index"].tolist(),
        ordered["session_id"].tolist(),
        ordered["dia_id"].tolist(),
        strict=True,
    ):
        ids.setdefault(int(index), str(session_id))
        if isinstance(dia, str) and dia:
            dias[int(index)].add(dia)
    return ids, dias


def build_histories(conversations: pd.DataFrame) -> dict[str, History]:
    """Every conversation of ``data/conversations.parquet`` rendered per session, with one
    batched token count over all sessions of all conversations."""
    pending: list[tuple[str, pd.DataFrame, list[tuple[int, str, str, frozenset[str]]]]] = []
    texts: list[str] = []
    for conversation_id, group in conversations.groupby("conversation_id", sort=False):
        ordered = _ordered(group)
        ids, dias = _session_ids(ordered)
        parts = []
        for index, session_text in data.render_sessions(ordered):
            text = session_text + data.SESSION_SEPARATOR
            parts.append((index, ids[index], text, frozenset(dias.get(index, ()))))
            texts.append(text)
        pending.append((str(conversation_id), ordered, parts))
    counts = iter(count_in_chunks(texts))
    histories: dict[str, History] = {}
    for conversation_id, ordered, parts in pending:
        blocks = tuple(
            SessionBlock(index + 1, session_id, text, next(counts), dia_ids)
            for index, session_id, text, dia_ids in parts
        )
        histories[conversation_id] = History(conversation_id, blocks, ordered)
    return histories


def history_table(histories: Mapping[str, History]) -> pd.DataFrame:
    """Per conversation: sessions, turns and the o200k tokens of its rendered history."""
    return pd.DataFrame(
        {
            "conversation_id": list(histories),
            "sessions": [len(h.sessions) for h in histories.values()],
            "turns": [len(h.turns) for h in histories.values()],
            "history_tokens": [h.tokens for h in histories.values()],
        }
    )


__all__ = [
    "History",
    "SessionBlock",
    "HistoryTurn",
    "build_histories",
    "count_in_chunks",
    "history_table",
    "rendered",
]
