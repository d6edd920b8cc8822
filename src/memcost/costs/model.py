"""The paper's cost model (study §3.5/§8), its break-even, and what the published tables imply.

Per user, with a history of ``L`` tokens and ``N`` questions about it:

* long context: ``C_LC(N) = C_first + (N − 1)·C_cached`` — the first turn pays the whole context
  at the input price, later turns find it in the provider's prompt cache;
* memory: ``C_Mem(N) = C_write + N·C_read`` — facts are extracted and embedded once, then each
  question pays a small retrieval-and-read call;
* break-even ``N_BE``: the first ``N`` with ``C_Mem(N) < C_LC(N)``.

Break-even is always computed from unrounded costs: the published Table 5 rows, rounded to four
decimals, give 9 instead of 10 at ``L = 100,000``. The published tables are reproduced by
:data:`PAPER_CONSTANTS`; :mod:`memcost.costs.calibration` derives the range of every constant that
is consistent with the published (rounded) cells, so the calibration is checked, not asserted.
This module holds notebook 05's section 3 (Eq. 1-2, Tables 4-5, rounding) and the grid behind
Figure 1 (section 5).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd

from memcost import paper
from memcost.catalog import Price

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
        """Cumulative memory cost after ``n`` questions (scalar or array)."""
        return self.write_usd + _turns(n) * self.read_usd

    def long_context(self, n: Any) -> Any:
        """Cumulative long-context cost after ``n`` questions (scalar or array)."""
        return self.lc_first_usd + (_turns(n) - 1) * self.lc_cached_usd

    def break_even(self, max_turns: int | None = None) -> int | None:
        """First ``N`` with ``C_Mem(N) < C_LC(N)``; ``None`` if memory never becomes cheaper
        (or not within ``max_turns``)."""
        return break_even(self, max_turns=max_turns)

    def rounded(self, decimals: int = 4) -> CostModel:
        """The same model with every cost rounded as a published table prints it."""
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
        """Each component multiplied (e.g. by the Batch-API multiplier)."""
        return replace(
            self,
            write_usd=self.write_usd * write,
            read_usd=self.read_usd * read,
            lc_first_usd=self.lc_first_usd * long_context,
            lc_cached_usd=self.lc_cached_usd * long_context,
        )


def break_even(model: CostModel, max_turns: int | None = None) -> int | None:
    """First ``N >= 1`` with ``C_Mem(N) < C_LC(N)``, in closed form.

    ``C_Mem(N) < C_LC(N)`` ⇔ ``N·(C_cached − C_read) > C_write − C_first + C_cached``. The
    closed form is then checked against the direct comparison of the two sums at the answer and
    the turn before it, so that it agrees with a brute-force search even at floating-point ties.
    """

    def cheaper(n: int) -> bool:
        return model.memory(n) < model.long_context(n)

    if cheaper(1):
        n: int | None = 1
    else:
        slope = model.lc_cached_usd - model.read_usd  # what each extra question saves with memory
        if slope <= 0:
            n = None  # the gap never shrinks: memory is never cheaper
        else:
            gap = model.write_usd - model.lc_first_usd + model.lc_cached_usd
            n = max(1, math.floor(gap / slope) + 1)
            while n > 1 and cheaper(n - 1):
                n -= 1
            while not cheaper(n):
                n += 1
    if n is not None and max_turns is not None and n > max_turns:
        return None
    return n


def break_even_brute_force(model: CostModel, max_turns: int = 10_000) -> int | None:
    """The definition, literally: try N = 1, 2, … (kept for tests and teaching)."""
    for n in range(1, max_turns + 1):
        if model.memory(n) < model.long_context(n):
            return n
    return None


@dataclass(frozen=True)
class CostConstants:
    """How the four costs scale with the context length ``L`` (study §8).

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
        """Constants with the long-context prices taken from a price-table entry."""
        return cls(
            input_usd_per_mtok=price.input,
            cached_input_usd_per_mtok=price.cached_rate,
            output_usd_per_mtok=price.output,
            **values,
        )

    def at(self, context_tokens: float) -> CostModel:
        """The cost model for a history of ``context_tokens`` tokens."""
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
        """Cached input priced at ``(1 − discount)`` of the input price (0.9 for GPT-5)."""
        return replace(self, cached_input_usd_per_mtok=self.input_usd_per_mtok * (1.0 - discount))

    def replace(self, **values: Any) -> CostConstants:
        return replace(self, **values)


# gpt-5-mini list prices of study §8; repeated here so the paper's constants do not move when
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
    """Round the dollar columns (``*_usd``) as the paper prints them."""
    out = frame.copy()
    for column in out.columns:
        if column.endswith("_usd"):
            out[column] = out[column].round(decimals)
    return out


def compare_with_paper(table4: pd.DataFrame, table5: pd.DataFrame) -> pd.DataFrame:
    """One row per published cell (26): paper value, reproduced value (rounded), match."""
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
    """Break-even from costs rounded to 4 decimals first (the wrong way), next to the right one."""
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
    """``C_LC − C_Mem`` (USD) with rows = turns, columns = context lengths (Figure 1's data)."""
    n = np.asarray(turns, dtype=float)
    columns = []
    for L in contexts:  # same arithmetic as CostModel, so the grid agrees with break_even()
        model = constants.at(L)
        columns.append(model.long_context(n) - model.memory(n))
    return np.column_stack(columns)


def break_even_curve(
    constants: CostConstants, contexts: Sequence[float], max_turns: int | None = None
) -> np.ndarray:
    """Break-even N per context length (NaN where memory never wins within ``max_turns``)."""
    values = [constants.at(L).break_even(max_turns=max_turns) for L in contexts]
    return np.array([np.nan if v is None else v for v in values], dtype=float)
