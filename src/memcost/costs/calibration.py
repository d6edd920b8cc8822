"""What the published Tables 4-5 imply: every cell a linear constraint, and the interval each
constant must lie in (notebook 05, section 4)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from memcost import paper
from memcost.costs.model import (
    PAPER_CONSTANTS,
    ROUNDING_HALF_WIDTH,
    STATED_CONSTANTS,
    TOKENS_PER_MILLION,
    CostConstants,
    break_even_table,
    compare_with_paper,
    cumulative_table,
)

# Unknowns of the solver, with the scale that makes each of order 1 for the LP.
SOLVER_VARIABLES: dict[str, tuple[str, float]] = {
    "write_usd_per_token": ("USD per history token", 1e-7),
    "read_usd": ("USD per question", 1e-3),
    "output_tokens": ("tokens per long-context turn", 1e2),
    "cached_share": ("share of context billed cached from turn 2", 1.0),
}


@dataclass(frozen=True)
class CellConstraint:
    label: str
    coefficients: tuple[float, float, float, float]  # on SOLVER_VARIABLES, in order
    constant: float  # the part of the cell that does not depend on the unknowns
    lower: float
    upper: float


Term = tuple[tuple[float, float, float, float], float]  # (coefficients, constant) of one cell


@dataclass(frozen=True)
class _CellTerms:
    """Each published cost as a linear term in the unknowns at fixed list prices."""

    p_in: float
    p_c: float
    p_out: float

    def memory(self, L: float, n: float) -> Term:
        return (L, n, 0.0, 0.0), 0.0

    def lc(self, L: float, n: float) -> Term:
        # C_first + (n-1)·C_cached with C_cached = L·(p_in − share·(p_in − p_c)) + out·p_out
        return (0.0, 0.0, n * self.p_out, -(n - 1) * L * (self.p_in - self.p_c)), n * L * self.p_in

    def cached(self, L: float) -> Term:
        return (0.0, 0.0, self.p_out, -L * (self.p_in - self.p_c)), L * self.p_in

    def memory_minus_lc(self, L: float, n: float) -> tuple[tuple[float, ...], float]:
        (mc, m0), (lcc, l0) = self.memory(L, n), self.lc(L, n)
        return tuple(a - b for a, b in zip(mc, lcc, strict=True)), m0 - l0


def _band(label: str, term: Term, value: float, half_width: float) -> CellConstraint:
    coefficients, constant = term
    return CellConstraint(label, coefficients, constant, value - half_width, value + half_width)


def _break_even_constraints(terms: _CellTerms, L: float, n_be: int) -> list[CellConstraint]:
    """Memory cheaper at ``N_BE``, not at ``N_BE − 1``."""
    coefficients, constant = terms.memory_minus_lc(L, n_be)
    out = [
        CellConstraint(
            f"T5 break-even L={int(L)}: memory cheaper at N={n_be}",
            coefficients,
            constant,
            -np.inf,
            0.0,
        )
    ]
    if n_be > 1:
        coefficients, constant = terms.memory_minus_lc(L, n_be - 1)
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
    """Every published cell (± half its last digit) and break-even as a linear constraint on (write
    per token, read, output tokens, cached share)."""
    terms = _CellTerms(
        *(
            x / TOKENS_PER_MILLION
            for x in (input_usd_per_mtok, cached_input_usd_per_mtok, output_usd_per_mtok)
        )
    )
    out: list[CellConstraint] = []
    L4 = float(table4_context_tokens)
    for _, row in table4.iterrows():
        n = float(row["n_turns"])
        out.append(
            _band(
                f"T4 memory N={int(n)}", terms.memory(L4, n), float(row["memory_usd"]), half_width
            )
        )
        out.append(
            _band(f"T4 LC N={int(n)}", terms.lc(L4, n), float(row["long_context_usd"]), half_width)
        )
    for _, row in table5.iterrows():
        L = float(row["context_tokens"])
        out += [
            _band(
                f"T5 write L={int(L)}",
                ((L, 0.0, 0.0, 0.0), 0.0),
                float(row["write_usd"]),
                half_width,
            ),
            _band(
                f"T5 LC turn 1 L={int(L)}", terms.lc(L, 1), float(row["lc_turn1_usd"]), half_width
            ),
            _band(
                f"T5 LC turn N L={int(L)}", terms.cached(L), float(row["lc_turn_n_usd"]), half_width
            ),
        ]
        if include_break_even:
            out += _break_even_constraints(terms, L, int(row["break_even_n"]))
    return out


def _scaled_system(constraints: Sequence[CellConstraint]) -> tuple[np.ndarray, np.ndarray]:
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


def _variable_bounds(fixed: Mapping[str, float] | None) -> list[tuple[float, float | None]]:
    natural_bounds = {"cached_share": (0.0, 1.0)}
    bounds: list[tuple[float, float | None]] = []
    for name, (_unit, scale) in SOLVER_VARIABLES.items():
        if fixed and name in fixed:
            bounds.append((fixed[name] / scale, fixed[name] / scale))
        else:
            low, high = natural_bounds.get(name, (0.0, None))
            bounds.append((low / scale, None if high is None else high / scale))
    return bounds


def _extreme(
    A: np.ndarray, b: np.ndarray, bounds: list[tuple[float, float | None]], i: int, sign: float
) -> float:
    from scipy.optimize import linprog

    c = np.zeros(len(SOLVER_VARIABLES))
    c[i] = sign
    result = linprog(c, A_ub=A, b_ub=b, bounds=bounds, method="highs")
    if result.status != 0:
        raise ValueError(
            f"the published cells admit no constants of this model ({result.message}); "
            "check the prices and which unknowns are fixed"
        )
    scale = list(SOLVER_VARIABLES.values())[i][1]
    return float(result.x[i] * scale)


def solve_implied_constants(
    constraints: Sequence[CellConstraint] | None = None,
    *,
    fixed: Mapping[str, float] | None = None,
    chosen: CostConstants = PAPER_CONSTANTS,
    stated: CostConstants = STATED_CONSTANTS,
) -> pd.DataFrame:
    """Each unknown's feasible interval (a linear programme per bound; ``fixed`` pins some), beside
    the chosen and stated values."""
    constraints = list(constraints) if constraints is not None else published_constraints()
    A, b = _scaled_system(constraints)
    bounds = _variable_bounds(fixed)
    rows = []
    for i, name in enumerate(SOLVER_VARIABLES):
        found = [_extreme(A, b, bounds, i, sign) for sign in (1.0, -1.0)]
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
    """How each published cell sits for ``constants`` (negative: violated)."""
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
