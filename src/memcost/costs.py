"""The paper's cost model (study §3.5/§8), its break-even, and what the published tables imply.

Per user, with a history of ``L`` tokens and ``N`` questions about it:

* long context: ``C_LC(N) = C_first + (N − 1)·C_cached`` — the first turn pays the whole context
  at the input price, later turns find it in the provider's prompt cache;
* memory: ``C_Mem(N) = C_write + N·C_read`` — facts are extracted and embedded once, then each
  question pays a small retrieval-and-read call;
* break-even ``N_BE``: the first ``N`` with ``C_Mem(N) < C_LC(N)``.

Break-even is always computed from unrounded costs: the published Table 5 rows, rounded to four
decimals, give 9 instead of 10 at ``L = 100,000``. The published tables are reproduced by
:data:`PAPER_CONSTANTS`; :func:`solve_implied_constants` derives the range of every constant that
is consistent with the published (rounded) cells, so the calibration is checked, not asserted.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd

from memcost import paper
from memcost.prices import Price

TOKENS_PER_MILLION = 1_000_000
ROUNDING_HALF_WIDTH = 0.00005  # a cell printed to 4 decimals lies within ±0.00005 of the truth

# ---------------------------------------------------------------------------------------------
# What the paper publishes (study §7-§8), kept here so tests and the report compare against it.
# ---------------------------------------------------------------------------------------------


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
    cheaper = memory < lc
    if cheaper.size == 0 or not cheaper[-1]:
        return None
    not_cheaper = np.flatnonzero(~cheaper)
    return 1 if not_cheaper.size == 0 else int(not_cheaper[-1]) + 2


def first_break_even(memory_per_turn: Sequence[float], lc_per_turn: Sequence[float]) -> int | None:
    """First turn (1-based) at which cumulative memory cost is below long context."""
    memory = np.cumsum(np.asarray(memory_per_turn, dtype=float))
    lc = np.cumsum(np.asarray(lc_per_turn, dtype=float))
    hits = np.flatnonzero(memory < lc)
    return int(hits[0]) + 1 if hits.size else None


# ---------------------------------------------------------------------------------------------
# Constants that turn a context length into a CostModel
# ---------------------------------------------------------------------------------------------
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


# ---------------------------------------------------------------------------------------------
# The calibration solver
# ---------------------------------------------------------------------------------------------
# Unknowns of the solver, with the scale that makes each of order 1 for the LP.
SOLVER_VARIABLES: dict[str, tuple[str, float]] = {
    "write_usd_per_token": ("USD per history token", 1e-7),
    "read_usd": ("USD per question", 1e-3),
    "output_tokens": ("tokens per long-context turn", 1e2),
    "cached_share": ("share of context billed cached from turn 2", 1.0),
}


@dataclass(frozen=True)
class CellConstraint:
    """``lower <= coefficients · x <= upper`` for one published cell (x in natural units)."""

    label: str
    coefficients: tuple[float, float, float, float]  # on SOLVER_VARIABLES, in order
    constant: float  # the part of the cell that does not depend on the unknowns
    lower: float
    upper: float


def published_constraints(
    *,
    input_usd_per_mtok: float = 0.25,
    cached_input_usd_per_mtok: float = 0.025,
    output_usd_per_mtok: float = 2.00,
    table4: pd.DataFrame = paper.TABLE4,
    table5: pd.DataFrame = paper.TABLE5,
    table4_context_tokens: float = paper.TABLE4_CONTEXT_TOKENS,
    half_width: float = ROUNDING_HALF_WIDTH,
    include_break_even: bool = True,
) -> list[CellConstraint]:
    """Every published cell as a linear constraint on (write/token, read, output tokens, share).

    Each printed cost ``c`` says the true cost lies in ``[c − 0.00005, c + 0.00005]``; each cost
    is linear in the unknowns once the list prices are fixed, and so is each break-even (the
    memory sum is above at ``N_BE − 1`` and below at ``N_BE``).
    """
    p_in, p_c, p_out = (
        x / TOKENS_PER_MILLION
        for x in (input_usd_per_mtok, cached_input_usd_per_mtok, output_usd_per_mtok)
    )

    def memory(L: float, n: float) -> tuple[tuple[float, float, float, float], float]:
        return (L, n, 0.0, 0.0), 0.0

    def lc(L: float, n: float) -> tuple[tuple[float, float, float, float], float]:
        # C_first + (n-1)·C_cached with C_cached = L·(p_in − share·(p_in − p_c)) + out·p_out
        return (0.0, 0.0, n * p_out, -(n - 1) * L * (p_in - p_c)), n * L * p_in

    out: list[CellConstraint] = []

    def band(
        label: str, term: tuple[tuple[float, float, float, float], float], value: float
    ) -> None:
        coefficients, constant = term
        out.append(
            CellConstraint(label, coefficients, constant, value - half_width, value + half_width)
        )

    L4 = float(table4_context_tokens)
    for _, row in table4.iterrows():
        n = float(row["n_turns"])
        band(f"T4 memory N={int(n)}", memory(L4, n), float(row["memory_usd"]))
        band(f"T4 LC N={int(n)}", lc(L4, n), float(row["long_context_usd"]))
    for _, row in table5.iterrows():
        L = float(row["context_tokens"])
        band(f"T5 write L={int(L)}", ((L, 0.0, 0.0, 0.0), 0.0), float(row["write_usd"]))
        band(f"T5 LC turn 1 L={int(L)}", lc(L, 1), float(row["lc_turn1_usd"]))
        cached_term = ((0.0, 0.0, p_out, -L * (p_in - p_c)), L * p_in)
        band(f"T5 LC turn N L={int(L)}", cached_term, float(row["lc_turn_n_usd"]))
        if include_break_even:
            n_be = int(row["break_even_n"])

            def diff(n: float, L: float = L) -> tuple[tuple[float, ...], float]:
                (mc, m0), (lcc, l0) = memory(L, n), lc(L, n)
                return tuple(a - b for a, b in zip(mc, lcc, strict=True)), m0 - l0

            coefficients, constant = diff(n_be)  # memory cheaper at N_BE: diff < 0
            out.append(
                CellConstraint(
                    f"T5 break-even L={int(L)}: memory cheaper at N={n_be}",
                    coefficients,
                    constant,
                    -np.inf,
                    0.0,
                )
            )
            if n_be > 1:  # ... and not cheaper at N_BE − 1: diff >= 0
                coefficients, constant = diff(n_be - 1)
                out.append(
                    CellConstraint(
                        f"T5 break-even L={int(L)}: LC not dearer at N={n_be - 1}",
                        coefficients,
                        constant,
                        0.0,
                        np.inf,
                    )
                )
    return out


def _scaled_system(constraints: Sequence[CellConstraint]) -> tuple[np.ndarray, np.ndarray]:
    """``A_ub x' <= b_ub`` in scaled variables x' (x = x'·scale), rows scaled to ~1."""
    scales = np.array([s for _, s in SOLVER_VARIABLES.values()])
    rows, bounds = [], []
    for c in constraints:
        a = np.asarray(c.coefficients, dtype=float) * scales * 1e4  # 1e4: a 4-decimal cell ~ 1
        if np.isfinite(c.upper):
            rows.append(a)
            bounds.append((c.upper - c.constant) * 1e4)
        if np.isfinite(c.lower):
            rows.append(-a)
            bounds.append(-(c.lower - c.constant) * 1e4)
    return np.array(rows), np.array(bounds)


def solve_implied_constants(
    constraints: Sequence[CellConstraint] | None = None,
    *,
    fixed: Mapping[str, float] | None = None,
    chosen: CostConstants = PAPER_CONSTANTS,
    stated: CostConstants = STATED_CONSTANTS,
) -> pd.DataFrame:
    """The feasible interval of every unknown constant, given the published cells.

    A linear programme per bound: minimise and maximise each unknown subject to all cells'
    rounding bands (and the break-even column). ``fixed`` pins unknowns (e.g.
    ``{"cached_share": 1.0}``). Returns one row per unknown with ``low``, ``high``, the chosen
    and the stated value, and whether each lies inside the interval.
    """
    from scipy.optimize import linprog

    constraints = list(constraints) if constraints is not None else published_constraints()
    names = list(SOLVER_VARIABLES)
    scales = np.array([s for _, s in SOLVER_VARIABLES.values()])
    natural_bounds = {"cached_share": (0.0, 1.0)}
    bounds = []
    for name, scale in zip(names, scales, strict=True):
        if fixed and name in fixed:
            bounds.append((fixed[name] / scale, fixed[name] / scale))
        else:
            low, high = natural_bounds.get(name, (0.0, None))
            bounds.append((low / scale, None if high is None else high / scale))
    A, b = _scaled_system(constraints)
    rows = []
    for i, name in enumerate(names):
        found = []
        for sign in (1.0, -1.0):
            c = np.zeros(len(names))
            c[i] = sign
            result = linprog(c, A_ub=A, b_ub=b, bounds=bounds, method="highs")
            if result.status != 0:
                raise ValueError(
                    f"the published cells admit no constants of this model ({result.message}); "
                    "check the prices and which unknowns are fixed"
                )
            found.append(result.x[i] * scales[i])
        low, high = found
        chosen_value = getattr(chosen, name)
        stated_value = getattr(stated, name)
        rows.append(
            {
                "constant": name,
                "unit": SOLVER_VARIABLES[name][0],
                "low": low,
                "high": high,
                "chosen": chosen_value,
                "chosen_inside": bool(
                    low - 1e-12 * abs(low) <= chosen_value <= high + 1e-12 * abs(high)
                ),
                "stated": stated_value,
                "stated_inside": bool(low <= stated_value <= high),
                "fixed": bool(fixed and name in fixed),
            }
        )
    return pd.DataFrame(rows)


def constraint_slack(
    constraints: Sequence[CellConstraint], constants: CostConstants
) -> pd.DataFrame:
    """How each published cell sits for a given set of constants (negative slack = violated)."""
    x = np.array([getattr(constants, name) for name in SOLVER_VARIABLES])
    rows = []
    for c in constraints:
        value = float(np.dot(c.coefficients, x) + c.constant)
        slack = min(value - c.lower, c.upper - value)
        rows.append(
            {
                "cell": c.label,
                "value": value,
                "lower": c.lower,
                "upper": c.upper,
                "slack": slack,
                "satisfied": slack >= 0,
            }
        )
    return pd.DataFrame(rows)


def calibration_table(variants: Mapping[str, CostConstants]) -> pd.DataFrame:
    """How many of the 26 published cells each set of constants reproduces."""
    rows = []
    for name, constants in variants.items():
        model4 = constants.at(paper.TABLE4_CONTEXT_TOKENS)
        table4 = cumulative_table(model4, paper.TABLE4["n_turns"])
        table5 = break_even_table(constants, paper.TABLE5["context_tokens"])
        cells = compare_with_paper(table4, table5)
        missed = cells.loc[~cells["match"]]
        rows.append(
            {
                "constants": name,
                "write_usd_per_token": constants.write_usd_per_token,
                "write_usd_at_101601": constants.write_usd_per_token * paper.TABLE4_CONTEXT_TOKENS,
                "read_usd": constants.read_usd,
                "output_tokens": constants.output_tokens,
                "cached_share": constants.cached_share,
                "cells_matched": int(cells["match"].sum()),
                "cells": len(cells),
                "first_mismatches": "; ".join(
                    f"{r.table} {r.row} {r.column}: {r.reproduced:.4f} vs {r.paper:.4f}"
                    for r in missed.head(3).itertuples()
                ),
            }
        )
    return pd.DataFrame(rows)


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


# ---------------------------------------------------------------------------------------------
# Grids and sensitivity
# ---------------------------------------------------------------------------------------------
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


def sensitivity_cache_discount(
    constants: CostConstants, discounts: Sequence[float], contexts: Sequence[float]
) -> pd.DataFrame:
    """Break-even as the provider's cached-input discount varies (paper: 90%)."""
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
    """Break-even as the long-context answer length (incl. reasoning) varies (paper: ~527)."""
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
    """Break-even when some components go through the Batch API (half price, 24 h window).

    Memory construction is offline work and suits batch pricing; interactive reads and
    long-context answers usually do not, which is why the scenarios are listed separately.
    """
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


# ---------------------------------------------------------------------------------------------
# Token-level break-even (study §9) and per-turn series
# ---------------------------------------------------------------------------------------------
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
