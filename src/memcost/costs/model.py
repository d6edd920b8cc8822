"""The paper's cost model (paper §3.5, Eq. 1-2), its Tables 4-5, Figure 1's grid, its sensitivity
and a growing conversation."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd

from memcost import paper
from memcost.catalog import Price
from memcost.costs.break_even import break_even

TOKENS_PER_MILLION = 1_000_000
ROUNDING_HALF_WIDTH = 0.00005  # a cell printed to 4 decimals lies within ±0.00005 of the truth


def _turns(n: Any) -> Any:
    """Scalars stay Python numbers (exact comparisons); sequences become float arrays."""
    return n if np.isscalar(n) else np.asarray(n, dtype=float)


@dataclass(frozen=True)
class CostModel:
    """The four per-user constants of the cost model at one context length."""

    write_usd: float  # C_write: extraction + embedding of one history, paid once
    read_usd: float  # C_read: one question answered from memory (retrieval + reader)
    lc_first_usd: float  # C_first: first long-context turn, whole context at the input price
    lc_cached_usd: float  # C_cached: each later turn, context served from the prompt cache
    context_tokens: float | None = None  # L, for labelling
    source: str = ""

    def memory(self, n: Any) -> Any:
        return self.write_usd + _turns(n) * self.read_usd

    def long_context(self, n: Any) -> Any:
        return self.lc_first_usd + (_turns(n) - 1) * self.lc_cached_usd

    def break_even(self, max_turns: int | None = None) -> int | None:
        """First ``N`` with ``C_Mem(N) < C_LC(N)`` (``None``: never, or not within
        ``max_turns``)."""
        costs = (self.write_usd, self.read_usd, self.lc_first_usd, self.lc_cached_usd)
        return break_even(*costs, max_turns=max_turns)

    def rounded(self, decimals: int = 4) -> CostModel:
        """Every cost rounded as a published table prints it."""
        return replace(
            self,
            write_usd=round(self.write_usd, decimals),
            read_usd=round(self.read_usd, decimals),
            lc_first_usd=round(self.lc_first_usd, decimals),
            lc_cached_usd=round(self.lc_cached_usd, decimals),
            source=f"{self.source} (rounded to {decimals} decimals)",
        )

    def scaled(
        self, *, write: float = 1.0, read: float = 1.0, long_context: float = 1.0
    ) -> CostModel:
        return replace(
            self,
            write_usd=self.write_usd * write,
            read_usd=self.read_usd * read,
            lc_first_usd=self.lc_first_usd * long_context,
            lc_cached_usd=self.lc_cached_usd * long_context,
        )


@dataclass(frozen=True)
class CostConstants:
    """How the four costs scale with the context length ``L`` (paper §3.5).

    ``C_write = write_usd_per_token·L``; ``C_read = read_usd``;
    ``C_first = (L·input + out·output)/1e6``;
    ``C_cached = (L·(share·cached + (1 − share)·input) + out·output)/1e6``.
    """

    write_usd_per_token: float  # memory construction per history token (extraction + embedding)
    read_usd: float  # per question answered from memory
    output_tokens: float  # completion (incl. reasoning) tokens per long-context turn
    cached_share: float  # share of the context billed as cached from turn 2 on
    input_usd_per_mtok: float  # long-context model, USD per 1M input tokens
    cached_input_usd_per_mtok: float  # ... per 1M cached input tokens
    output_usd_per_mtok: float  # ... per 1M output tokens
    source: str = ""

    @classmethod
    def for_price(cls, price: Price, **values: Any) -> CostConstants:
        return cls(
            input_usd_per_mtok=price.input,
            cached_input_usd_per_mtok=price.cached_rate,
            output_usd_per_mtok=price.output,
            **values,
        )

    def at(self, context_tokens: float) -> CostModel:
        L = float(context_tokens)
        out = self.output_tokens * self.output_usd_per_mtok / TOKENS_PER_MILLION
        cached_rate = (
            self.cached_share * self.cached_input_usd_per_mtok
            + (1.0 - self.cached_share) * self.input_usd_per_mtok
        )
        return CostModel(
            write_usd=self.write_usd_per_token * L,
            read_usd=self.read_usd,
            lc_first_usd=L * self.input_usd_per_mtok / TOKENS_PER_MILLION + out,
            lc_cached_usd=L * cached_rate / TOKENS_PER_MILLION + out,
            context_tokens=context_tokens,
            source=self.source,
        )

    def with_cache_discount(self, discount: float) -> CostConstants:
        return replace(self, cached_input_usd_per_mtok=self.input_usd_per_mtok * (1.0 - discount))

    def replace(self, **values: Any) -> CostConstants:
        return replace(self, **values)


# gpt-5-mini list prices of paper §3.5; repeated here so the paper's constants do not move when
# the price table is updated for a later date (tests check the two agree for the paper's date).
PAPER_CONSTANTS = CostConstants(
    write_usd_per_token=4.296e-7,  # Table 5 write column ÷ L (text: $0.0435 per conversation)
    read_usd=0.001317,  # Table 4 memory column's slope (text: ~$0.0013)
    output_tokens=527,  # Table 4/5 long-context columns above the input price
    cached_share=1.0,  # whole context billed as cached from turn 2 (no uncached question tokens)
    input_usd_per_mtok=0.25,
    cached_input_usd_per_mtok=0.025,
    output_usd_per_mtok=2.00,
    source="paper constants implied by Tables 4-5",
)
# What the text of §4.2 states: $0.0435 to write one ~101.6k-token history, ~$0.0013 per read.
STATED_CONSTANTS = replace(
    PAPER_CONSTANTS,
    write_usd_per_token=0.0435 / paper.TABLE4_CONTEXT_TOKENS,
    read_usd=0.0013,
    source="constants stated in the paper's text",
)


def cumulative_table(model: CostModel, turns: Iterable[int]) -> pd.DataFrame:
    """Table 4's layout: cumulative cost per user after N questions (unrounded)."""
    n = np.asarray(list(turns), dtype=int)
    return pd.DataFrame(
        {"n_turns": n, "memory_usd": model.memory(n), "long_context_usd": model.long_context(n)}
    )


def break_even_table(constants: CostConstants, contexts: Iterable[float]) -> pd.DataFrame:
    """Table 5's layout: the three costs and the break-even (from unrounded costs) per L."""
    rows = []
    for L in contexts:
        m = constants.at(L)
        rows.append(
            {
                "context_tokens": int(L),
                "write_usd": m.write_usd,
                "lc_turn1_usd": m.lc_first_usd,
                "lc_turn_n_usd": m.lc_cached_usd,
                "break_even_n": m.break_even(),
            }
        )
    return pd.DataFrame(rows)


def round_table(frame: pd.DataFrame, decimals: int = 4) -> pd.DataFrame:
    out = frame.copy()
    for column in out.columns:
        if column.endswith("_usd"):
            out[column] = out[column].round(decimals)
    return out


def compare_with_paper(table4: pd.DataFrame, table5: pd.DataFrame) -> pd.DataFrame:
    """One row per published cell (26): the paper's value, the reproduced one rounded, match."""
    rows = []
    ours4 = round_table(table4).set_index("n_turns")
    for _, row in paper.TABLE4.iterrows():
        for column in ("memory_usd", "long_context_usd"):
            ours = ours4.loc[row["n_turns"], column] if row["n_turns"] in ours4.index else np.nan
            rows.append(("Table 4", f"N={int(row['n_turns'])}", column, row[column], ours))
    ours5 = round_table(table5).set_index("context_tokens")
    for _, row in paper.TABLE5.iterrows():
        L = row["context_tokens"]
        for column in ("write_usd", "lc_turn1_usd", "lc_turn_n_usd", "break_even_n"):
            ours = ours5.loc[L, column] if L in ours5.index else np.nan
            rows.append(("Table 5", f"L={int(L):,}", column, row[column], ours))
    out = pd.DataFrame(rows, columns=["table", "row", "column", "paper", "reproduced"])
    out["match"] = np.isclose(
        out["paper"].astype(float), out["reproduced"].astype(float), rtol=0, atol=1e-9
    )
    return out


def break_even_from_rounded_rows(
    constants: CostConstants, contexts: Iterable[float]
) -> pd.DataFrame:
    """Break-even from costs rounded to 4 decimals first (the wrong way), beside the right one."""
    rows = []
    for L in contexts:
        model = constants.at(L)
        rows.append(
            {
                "context_tokens": int(L),
                "break_even_unrounded": model.break_even(),
                "break_even_from_rounded": model.rounded(4).break_even(),
            }
        )
    return pd.DataFrame(rows)


# Figure 1's data
def cost_difference_grid(
    constants: CostConstants, contexts: Sequence[float], turns: Sequence[int]
) -> np.ndarray:
    """``C_LC − C_Mem`` with rows = turns, columns = context lengths (Figure 1's data)."""
    n = np.asarray(turns, dtype=float)
    columns = []
    for L in contexts:  # same arithmetic as CostModel, so the grid agrees with break_even()
        model = constants.at(L)
        columns.append(model.long_context(n) - model.memory(n))
    return np.column_stack(columns)


def break_even_curve(
    constants: CostConstants, contexts: Sequence[float], max_turns: int | None = None
) -> np.ndarray:
    values = [constants.at(L).break_even(max_turns=max_turns) for L in contexts]
    return np.array([np.nan if v is None else v for v in values], dtype=float)


def sensitivity_cache_discount(
    constants: CostConstants, discounts: Sequence[float], contexts: Sequence[float]
) -> pd.DataFrame:
    rows = [
        {
            "cache_discount": d,
            "context_tokens": int(L),
            "break_even_n": constants.with_cache_discount(d).at(L).break_even(),
        }
        for d in discounts
        for L in contexts
    ]
    return pd.DataFrame(rows)


def sensitivity_output_tokens(
    constants: CostConstants, output_tokens: Sequence[float], contexts: Sequence[float]
) -> pd.DataFrame:
    rows = [
        {
            "output_tokens": o,
            "context_tokens": int(L),
            "break_even_n": constants.replace(output_tokens=o).at(L).break_even(),
        }
        for o in output_tokens
        for L in contexts
    ]
    return pd.DataFrame(rows)


BATCH_SCENARIOS: dict[str, tuple[bool, bool, bool]] = {
    # name: (write, read, long context) billed at Batch-API prices
    "list prices": (False, False, False),
    "batch write": (True, False, False),
    "batch write + read": (True, True, False),
    "batch long context": (False, False, True),
    "batch everything": (True, True, True),
}


def sensitivity_batch(
    constants: CostConstants,
    contexts: Sequence[float],
    multiplier: float,
    scenarios: Mapping[str, tuple[bool, bool, bool]] = BATCH_SCENARIOS,
) -> pd.DataFrame:
    """Break-even with some components at Batch prices (writing memory suits batch; reads and
    answers usually do not)."""
    rows = []
    for name, (write, read, lc) in scenarios.items():
        for L in contexts:
            model = constants.at(L).scaled(
                write=multiplier if write else 1.0,
                read=multiplier if read else 1.0,
                long_context=multiplier if lc else 1.0,
            )
            rows.append(
                {"scenario": name, "context_tokens": int(L), "break_even_n": model.break_even()}
            )
    return pd.DataFrame(rows)


def token_break_even(
    ingestion_tokens: float,
    corpus_tokens: float,
    retrieved_tokens: float,
    query_overhead_tokens: float = 0.0,
) -> float:
    """Queries after which memory has processed fewer tokens than resending the corpus: ``ingestion
    / (corpus + overhead − retrieved)``, no caching, no prices."""
    saved = corpus_tokens + query_overhead_tokens - retrieved_tokens
    if saved <= 0:
        return math.inf
    return ingestion_tokens / saved


def ingestion_multiplier(ingestion_tokens: float, corpus_tokens: float) -> float:
    return ingestion_tokens / corpus_tokens


def growing_conversation_series(
    constants: CostConstants,
    *,
    turns: int,
    message_tokens: float,
    ingest_every: int = 10,
) -> pd.DataFrame:
    """Per-turn costs when the history grows by ``message_tokens`` a turn: long context resends it
    (all but the newest message cached), memory ingests every ``ingest_every`` turns (a spike)
    and reads each turn, so the first and sustained break-even differ."""
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
    """Per context length: the token-level break-even, the ingestion multiplier, and the dollar
    break-even without and with prompt caching."""
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
