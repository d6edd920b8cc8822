"""``rag``: retrieval over raw chunks of the history, the baseline of Mem0's paper."""

from __future__ import annotations

import numpy as np
import pandas as pd

from memcost.catalog import REQUEST_TOKENS
from memcost.paper import EMBEDDING_MODEL
from memcost.text import count_tokens
from memcost_systems.live import HistoryLine, user_lines
from memcost_systems.stored import StoredSystem, UserIngest, UserItems, item_rows, nearest, shown

CHUNK_TOKENS = 1024
TOP_K = 2


def chunk_lines(lines: list[HistoryLine], chunk_tokens: int) -> list[dict]:
    """Consecutive messages into chunks of at most ``chunk_tokens`` (a longer message is a chunk
    of its own: nothing is cut or dropped)."""
    chunks: list[dict] = []
    current: list[HistoryLine] = []
    size = 0

    def close() -> None:
        chunks.append(
            {
                "text": "\n".join(x.render() for x in current),
                "tokens": size,
                "session_datetime": current[0].session_datetime,
                "positions": [x.position for x in current],
            }
        )

    for line in lines:
        n = count_tokens(line.render() + "\n")
        if current and size + n > chunk_tokens:
            close()
            current, size = [], 0
        current.append(line)
        size += n
    if current:
        close()
    return [{**c, "item_id": f"c{i}", "kind": "chunk"} for i, c in enumerate(chunks)]


class _Chunking(UserIngest):
    def __init__(self, user: str, lines: list[HistoryLine], chunk_tokens: int):
        super().__init__(user, lines)
        self.chunk_tokens = chunk_tokens

    def items(self) -> pd.DataFrame:
        return item_rows(chunk_lines(self.lines, self.chunk_tokens))


class Rag(StoredSystem):
    name = "rag"
    answers_as = "memory_rag"
    describes = "raw chunks of the history, embedded; top-k by similarity (no extraction)"
    write_passes = 0.0  # no model call before the first question: the chunks' embeddings alone
    write_update_phase = False
    defaults = {"chunk_tokens": CHUNK_TOKENS, "top_k": TOP_K, "embedding_model": EMBEDDING_MODEL}
    embed_kinds = ("chunk",)
    stages_in_turn = ()  # embeddings alone, each user's in one go

    @classmethod
    def read_context_tokens(cls, settings, history_tokens, turn_tokens):
        """``top_k`` full chunks, never more than the history itself."""
        return min(int(settings["top_k"]) * int(settings["chunk_tokens"]), history_tokens)

    @classmethod
    def write_calls(cls, settings, stats, segments):
        """Embedding requests: each user's chunks in as few as the API's tokens a request allow
        (memcost.llm.offline.plan_batches), one for any benchmark's history."""
        return int(sum(-(-int(t) // REQUEST_TOKENS) for t in stats["text_tokens"])), 1.0

    def start(self, user: str, turns: pd.DataFrame) -> UserIngest:
        return _Chunking(user, user_lines(turns), int(self.settings["chunk_tokens"]))

    def search(self, memory: UserItems, question: dict, query: np.ndarray) -> pd.DataFrame:
        eligible = np.ones(len(memory.items), dtype=bool)
        picked = nearest(memory.vectors, query, eligible, int(self.settings["top_k"]))
        return shown(memory.items, [r for r, _ in picked], dict(picked))
