"""The serving cost models: fit, held-out error and whole-run bootstrap (study §4, Table 1).

The study fits, per system and model, on every turn of every run::

    log(C + 1) = a + p·log(L + 1) + q·log(t + 1)

with ``C`` the billable input tokens of a turn (ingest + retrieval + answer), ``L`` the cell's
mean tokens per turn and ``t`` the turn (0-based). It reports R² on the log scale and the
leave-one-cell-out MAPE: drop one ``(N, L)`` cell, refit on the others, predict the held-out
cell's mean cost per turn. Intervals for ``p`` and ``q`` come from a cluster bootstrap that
resamples whole runs (turns of one run are not independent). The one-variable comparison fits
``log(C + 1) = a + b·log(T + 1)`` with ``T = N·L``, a conversation's total content. The
*memory-state* model (beyond the study) adds what the system holds: items and tokens stored,
tokens waiting for the ingest gate, and whether the gate fired.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

RUN_KEYS = [
    "source",
    "system",
    "model",
    "reasoning_effort",
    "cell",
    "n_turns",
    "mean_tokens",
    "seed",
    "conversation_id",
]
MODELS = ("separable", "total", "state")


def turn_costs(rows: pd.DataFrame) -> pd.DataFrame:
    """One row per turn of every run: ``C`` (input tokens of all its stages), cached, output,
    reasoning tokens, dollars (when priced), whether the gate fired, the state when answering."""
    agg = {
        "C": ("prompt_tokens", "sum"),
        "cached_tokens": ("cached_tokens", "sum"),
        "output_tokens": ("output_tokens", "sum"),
        "reasoning_tokens": ("reasoning_tokens", "sum"),
        "gate_fired": ("gate_fired", "any"),
        "memory_items": ("memory_items", "first"),
        "memory_tokens": ("memory_tokens", "first"),
        "pending_tokens": ("pending_tokens", "first"),
    }
    if "usd" in rows.columns:
        agg["usd"] = ("usd", "sum")
    out = rows.groupby([*RUN_KEYS, "turn"], sort=True, dropna=False).agg(**agg).reset_index()
    out["run"] = out.groupby(RUN_KEYS, sort=True, dropna=False).ngroup()  # one id per run
    return out


def design(frame: pd.DataFrame, model: str = "separable") -> np.ndarray:
    """The regressors of ``model`` (with an intercept column)."""
    one = np.ones(len(frame))
    log_l = np.log(frame["mean_tokens"].to_numpy(float) + 1)
    log_t = np.log(frame["turn"].to_numpy(float) + 1)
    if model == "separable":
        return np.column_stack([one, log_l, log_t])
    if model == "total":
        total = frame["n_turns"].to_numpy(float) * frame["mean_tokens"].to_numpy(float)
        return np.column_stack([one, np.log(total + 1)])
    if model == "state":
        gate = frame["gate_fired"].to_numpy(float)
        pending = np.log(frame["pending_tokens"].to_numpy(float) + 1)
        return np.column_stack(
            [
                one,
                log_l,
                log_t,
                np.log(frame["memory_tokens"].to_numpy(float) + 1),
                np.log(frame["memory_items"].to_numpy(float) + 1),
                pending,
                gate,
                gate * pending,
            ]
        )
    raise ValueError(f"unknown cost model {model!r}; choose from {', '.join(MODELS)}")


def target(frame: pd.DataFrame) -> np.ndarray:
    return np.log(frame["C"].to_numpy(float) + 1)


@dataclass(frozen=True)
class Fit:
    model: str
    coef: np.ndarray
    r2: float
    n: int

    @property
    def a(self) -> float:
        return float(self.coef[0])

    @property
    def p(self) -> float:
        return float(self.coef[1]) if self.model != "total" else float("nan")

    @property
    def q(self) -> float:
        return float(self.coef[2]) if self.model != "total" else float("nan")

    def predict(self, frame: pd.DataFrame) -> np.ndarray:
        """Predicted cost per turn, in tokens (back from the log scale)."""
        return np.expm1(design(frame, self.model) @ self.coef)


def fit(frame: pd.DataFrame, model: str = "separable") -> Fit:
    """Least squares on every turn; R² of the log-scale fit."""
    x, y = design(frame, model), target(frame)
    coef, *_ = np.linalg.lstsq(x, y, rcond=None)
    residual = y - x @ coef
    total = float(((y - y.mean()) ** 2).sum())
    r2 = 1.0 - float((residual**2).sum()) / total if total > 0 else float("nan")
    return Fit(model, coef, r2, len(frame))


def loocv(frame: pd.DataFrame, model: str = "separable") -> pd.DataFrame:
    """Leave one cell out: refit on the other cells, predict the held-out cell's mean cost per
    turn. One row per cell: ``actual``, ``predicted``, ``ape`` (absolute % error), ``ratio``
    (how many times off, ≥ 1). Empty with fewer than two cells."""
    cells = sorted(frame["cell"].unique(), key=str)
    rows = []
    if len(cells) < 2:
        return pd.DataFrame(columns=["cell", "actual", "predicted", "ape", "ratio"])
    for cell in cells:
        held = frame["cell"] == cell
        fitted = fit(frame.loc[~held], model)
        actual = float(frame.loc[held, "C"].mean())
        predicted = float(fitted.predict(frame.loc[held]).mean())
        ratio = (
            max(predicted / actual, actual / predicted)
            if actual > 0 and predicted > 0
            else (float("inf"))
        )
        rows.append(
            {
                "cell": cell,
                "actual": actual,
                "predicted": predicted,
                "ape": 100 * abs(predicted - actual) / actual,
                "ratio": ratio,
            }
        )
    return pd.DataFrame(rows)


def loocv_mape(frame: pd.DataFrame, model: str = "separable") -> float:
    errors = loocv(frame, model)
    return float(errors["ape"].mean()) if len(errors) else float("nan")


def _normal_equations(
    x: np.ndarray, y: np.ndarray, groups: np.ndarray, k: int
) -> tuple[np.ndarray, np.ndarray]:
    """Per-group ``XᵀX`` and ``Xᵀy``, so a resample is a weighted sum, not a refit of rows."""
    xtx = np.zeros((k, x.shape[1], x.shape[1]))
    xty = np.zeros((k, x.shape[1]))
    np.add.at(xtx, groups, np.einsum("ni,nj->nij", x, x))
    np.add.at(xty, groups, x * y[:, None])
    return xtx, xty


def bootstrap(
    frame: pd.DataFrame,
    *,
    n_resamples: int = 1000,
    seed: int = 0,
    unit: str = "run",
    model: str = "separable",
) -> np.ndarray:
    """Coefficients of ``n_resamples`` refits on resampled data, shape ``(n_resamples, k)``.

    ``unit="run"`` draws whole runs with replacement (the study's cluster bootstrap);
    ``unit="turn"`` draws single turns, which treats the turns of a run as independent and is
    here only to show how much too narrow that would be.
    """
    x, y = design(frame, model), target(frame)
    if unit == "run":
        groups, _ = pd.factorize(frame["run"], sort=True)
    elif unit == "turn":
        groups = np.arange(len(frame))
    else:
        raise ValueError(f"unit must be 'run' or 'turn', got {unit!r}")
    k = int(groups.max()) + 1
    xtx, xty = _normal_equations(x, y, groups, k)
    rng = np.random.default_rng(seed)
    out = np.empty((n_resamples, x.shape[1]))
    for b in range(n_resamples):
        weights = np.bincount(rng.integers(0, k, size=k), minlength=k).astype(float)
        a = np.tensordot(weights, xtx, axes=1)
        out[b] = np.linalg.lstsq(a, weights @ xty, rcond=None)[0]
    return out


def interval(samples: np.ndarray, confidence: float = 0.95) -> tuple[float, float]:
    alpha = 1 - confidence
    low, high = np.quantile(samples, [alpha / 2, 1 - alpha / 2])
    return float(low), float(high)


def exponents_table(
    turns: pd.DataFrame,
    *,
    by: Sequence[str] = ("system", "model", "reasoning_effort"),
    n_resamples: int = 1000,
    seed: int = 0,
) -> pd.DataFrame:
    """The study's Table 1: per group ``p``, ``q`` with 95% whole-run bootstrap intervals, R²,
    LOOCV-MAPE and the worst held-out cell; the one-variable ``T = N·L`` model's R² and
    LOOCV-MAPE; the memory-state model's LOOCV-MAPE."""
    rows = []
    for key, part in turns.groupby(list(by), sort=True):
        sep, total = fit(part, "separable"), fit(part, "total")
        boot = bootstrap(part, n_resamples=n_resamples, seed=seed)
        errors = loocv(part, "separable")
        p_lo, p_hi = interval(boot[:, 1])
        q_lo, q_hi = interval(boot[:, 2])
        rows.append(
            {
                **dict(zip(by, key if isinstance(key, tuple) else (key,), strict=True)),
                "runs": part["run"].nunique(),
                "cells": part["cell"].nunique(),
                "turns": len(part),
                "a": sep.a,
                "p": sep.p,
                "p_low": p_lo,
                "p_high": p_hi,
                "q": sep.q,
                "q_low": q_lo,
                "q_high": q_hi,
                "r2": sep.r2,
                "loocv_mape": float(errors["ape"].mean()) if len(errors) else float("nan"),
                "worst_cell": errors.loc[errors["ratio"].idxmax(), "cell"] if len(errors) else None,
                "worst_ratio": float(errors["ratio"].max()) if len(errors) else float("nan"),
                "r2_total": total.r2,
                "loocv_mape_total": loocv_mape(part, "total"),
                "loocv_mape_state": loocv_mape(part, "state"),
            }
        )
    return pd.DataFrame(rows)
