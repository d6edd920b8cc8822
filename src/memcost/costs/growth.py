"""Break-even beyond the static snapshot: notebook 05's sections 6.2 and 6.4.

* first and sustained break-even of a per-turn cost series (memory can get ahead and fall back);
* a conversation whose history grows every turn, with memory ingesting in batches;
* the token-level break-even (study §9, no caching, no prices) next to the dollar one.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from memcost import paper
from memcost.costs.model import TOKENS_PER_MILLION, CostConstants
from memcost.stats import stays_below_from


def sustained_break_even(
    memory_per_turn: Sequence[float], lc_per_turn: Sequence[float]
) -> int | None:
    """First turn after which cumulative memory cost stays below long context for every later
    turn of the series (1-based); ``None`` if memory is not cheaper at the last turn.

    With the paper's constant per-turn costs this equals :func:`break_even`; with real per-turn
    series (ingestion spikes, growing histories) memory can get ahead and fall back, so the first
    crossing overstates how early memory pays off.
    """
    memory = np.cumsum(np.asarray(memory_per_turn, dtype=float))
    lc = np.cumsum(np.asarray(lc_per_turn, dtype=float))
    if memory.shape != lc.shape:
        raise ValueError(f"series lengths differ: memory {memory.shape}, long context {lc.shape}")
    start = stays_below_from(memory, lc)
    return None if start is None else start + 1  # questions are numbered from 1


def first_break_even(memory_per_turn: Sequence[float], lc_per_turn: Sequence[float]) -> int | None:
    """First turn (1-based) at which cumulative memory cost is below long context."""
    memory = np.cumsum(np.asarray(memory_per_turn, dtype=float))
    lc = np.cumsum(np.asarray(lc_per_turn, dtype=float))
    hits = np.flatnonzero(memory < lc)
    return int(hits[0]) + 1 if hits.size else None


def token_break_even(
    ingestion_tokens: float,
    corpus_tokens: float,
    retrieved_tokens: float,
    query_overhead_tokens: float = 0.0,
) -> float:
    """Queries after which memory has processed fewer tokens than re-sending the corpus.

    ``ingestion / (corpus + overhead − retrieved)``: each query saves the corpus it does not
    resend, minus the facts it retrieves instead. No caching and no prices: a pure token count.
    """
    saved = corpus_tokens + query_overhead_tokens - retrieved_tokens
    if saved <= 0:
        return math.inf
    return ingestion_tokens / saved


def ingestion_multiplier(ingestion_tokens: float, corpus_tokens: float) -> float:
    """Tokens processed to build memory per token of history (close to the token break-even)."""
    return ingestion_tokens / corpus_tokens


def growing_conversation_series(
    constants: CostConstants,
    *,
    turns: int,
    message_tokens: float,
    ingest_every: int = 10,
) -> pd.DataFrame:
    """Per-turn costs when the history grows during the conversation (the serving-cost view).

    Each turn adds ``message_tokens`` to the history. Long context resends the whole history;
    everything but the newest message is a cached prefix. Memory ingests the last
    ``ingest_every`` turns' messages every ``ingest_every`` turns (a cost spike) and pays one
    read per turn. Cumulative memory can then get ahead of long context and fall back after a
    spike: the first crossing and the sustained break-even differ.
    """
    t = np.arange(1, turns + 1, dtype=float)
    p_in = constants.input_usd_per_mtok / TOKENS_PER_MILLION
    share = constants.cached_share
    p_c = (
        share * constants.cached_input_usd_per_mtok + (1 - share) * constants.input_usd_per_mtok
    ) / TOKENS_PER_MILLION
    out = constants.output_tokens * constants.output_usd_per_mtok / TOKENS_PER_MILLION
    history = t * message_tokens
    lc = message_tokens * p_in + (history - message_tokens) * p_c + out
    ingest = np.where(
        t % ingest_every == 0, ingest_every * message_tokens * constants.write_usd_per_token, 0.0
    )
    memory = ingest + constants.read_usd
    return pd.DataFrame(
        {
            "turn": t.astype(int),
            "history_tokens": history,
            "memory_usd": memory,
            "long_context_usd": lc,
            "memory_cumulative_usd": np.cumsum(memory),
            "long_context_cumulative_usd": np.cumsum(lc),
        }
    )


# Ingested tokens per history token in the paper's LongMemEval run (§4.2): extraction prompt and
# completion tokens plus fact-embedding tokens, per conversation, over the mean history.
PAPER_INGESTION_MULTIPLIER = (
    (paper.MEASURED["extraction_tokens"] + paper.MEASURED["embedding_tokens"])
    / paper.MEASURED["conversations"]
    / paper.TABLE4_CONTEXT_TOKENS
)


def token_vs_dollar_table(
    constants: CostConstants,
    contexts: Sequence[float],
    *,
    ingestion_per_history_token: float = PAPER_INGESTION_MULTIPLIER,
    retrieved_tokens: float = paper.MEASURED["read_retrieved_tokens_per_question"],
    query_overhead_tokens: float = 0.0,
) -> pd.DataFrame:
    """Per context length: the token-level break-even (no caching), the ingestion multiplier,
    and the dollar break-even without and with prompt caching.

    Ingestion grows with the history (a fixed multiplier per history token); each memory query
    reads ``retrieved_tokens`` of facts instead of the history.
    """
    rows = []
    for L in contexts:
        ingestion = ingestion_per_history_token * L
        rows.append(
            {
                "context_tokens": int(L),
                "ingestion_tokens": ingestion,
                "ingestion_multiplier": ingestion_multiplier(ingestion, L),
                "token_break_even": token_break_even(
                    ingestion, L, retrieved_tokens, query_overhead_tokens
                ),
                "dollar_break_even_no_cache": constants.with_cache_discount(0.0).at(L).break_even(),
                "dollar_break_even_cached": constants.at(L).break_even(),
            }
        )
    return pd.DataFrame(rows)
