"""The serving study's analysis (Total Recall §4): cost models, break-even, accuracy, tables."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

import memcost_serving.study as study
from memcost.catalog import canonical_name, slug
from memcost.costs.break_even import stays_below_from
from memcost.io import read_jsonl
from memcost.memory.base import system_class
from memcost.stats import cluster_bootstrap_interval
from memcost_serving.replay import TURN_COLUMNS
from memcost_serving.systems import SERVED

RUN_KEYS = list(TURN_COLUMNS[: TURN_COLUMNS.index("turn")])  # what identifies one run
MODELS = ("separable", "total", "state")


def turn_costs(rows: pd.DataFrame) -> pd.DataFrame:
    """One row per turn of every run: input tokens of all its stages, cached, output, reasoning,
    dollars, the gate, the state."""
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
        return np.expm1(design(frame, self.model) @ self.coef)


def fit(frame: pd.DataFrame, model: str = "separable") -> Fit:
    x, y = design(frame, model), target(frame)
    coef, *_ = np.linalg.lstsq(x, y, rcond=None)
    residual = y - x @ coef
    total = float(((y - y.mean()) ** 2).sum())
    r2 = 1.0 - float((residual**2).sum()) / total if total > 0 else float("nan")
    return Fit(model, coef, r2, len(frame))


def loocv(frame: pd.DataFrame, model: str = "separable") -> pd.DataFrame:
    """Leave one cell out: ``actual``, ``predicted``, ``ape``, ``ratio`` (≥ 1) per cell."""
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
    """Per-group ``XᵀX`` and ``Xᵀy``: a resample is a weighted sum, not a refit."""
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
    """Coefficients of ``n_resamples`` refits, drawing whole runs (``unit="run"``, the study's) or
    single turns (to show how much too narrow that is)."""
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
    """The study's Table 1: ``p``, ``q`` with whole-run bootstrap intervals, R², LOOCV-MAPE, the
    worst cell, and the ``T = N·L`` and memory-state models'."""
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


REFERENCE = "full_history"
NEVER = "never"


def label(t_be: int | None) -> str:
    return NEVER if t_be is None else str(t_be)


CURVE_KEYS = ["source", "model", "reasoning_effort", "cell", "n_turns", "mean_tokens", "system"]


def cumulative_curves(turns: pd.DataFrame, value: str = "usd") -> pd.DataFrame:
    frame = turns.sort_values("turn").copy()
    frame["cumulative"] = frame.groupby("run")[value].cumsum()
    return frame.groupby([*CURVE_KEYS, "turn"], sort=True)["cumulative"].mean().reset_index()


def break_even_by_cell(curves: pd.DataFrame, reference: str = REFERENCE) -> pd.DataFrame:
    """Per cell, model and memory system: ``t_be`` (a turn or null), its label, both cumulative
    costs at the last turn."""
    rows = []
    keys = [k for k in CURVE_KEYS if k != "system"]
    for key, part in curves.groupby(keys, sort=True):
        full = part[part["system"] == reference].set_index("turn")["cumulative"]
        if full.empty:
            continue
        for system, mine in part[part["system"] != reference].groupby("system"):
            mine = mine.set_index("turn")["cumulative"]
            turns = full.index.intersection(mine.index)
            t_be = stays_below_from(mine.loc[turns].to_numpy(), full.loc[turns].to_numpy())
            rows.append(
                {
                    **dict(zip(keys, key, strict=True)),
                    "system": system,
                    "t_be": t_be,
                    "break_even": label(t_be),
                    "cumulative_memory": float(mine.loc[turns].iloc[-1]),
                    "cumulative_full_history": float(full.loc[turns].iloc[-1]),
                }
            )
    out = pd.DataFrame(rows)
    if not out.empty:
        out["t_be"] = out["t_be"].astype("Int64")
    return out


def judged_system(system: str, model: str) -> str | None:
    """The notebook-04 system whose answers stand for a served system (``None``: none)."""
    if system in SERVED:
        return system_class(SERVED[system].system).answers_as
    return {
        "full_history": f"long_context_{slug(model)}",
        "rolling_window": f"rolling_window_{slug(model)}",
    }.get(system)


def subset_accuracy(
    judgments_path: Path,
    conversations: Sequence[str],
    systems: Sequence[str],
    models: Sequence[str],
    *,
    mapping: Mapping[str, str] | None = None,
    judge_model: str = "",
    n_resamples: int = 1000,
    seed: int = 0,
) -> pd.DataFrame:
    """One row per served system and model: ``accuracy`` (one vote per answer, of ``judge_model``
    where it judged) with its interval and source, or ``status`` saying why missing."""
    records = read_jsonl(judgments_path, missing_ok=True)
    judged = pd.DataFrame(records)
    rows = []
    for system in systems:
        for model in models:
            name = (mapping or {}).get(system) or judged_system(system, model)
            row = {
                "system": system,
                "model": model,
                "judged_system": name,
                "accuracy": None,
                "accuracy_low": None,
                "accuracy_high": None,
                "questions": 0,
            }
            if name is None:
                rows.append({**row, "status": "missing: no judged counterpart of this system"})
                continue
            if judged.empty:
                rows.append({**row, "status": f"missing: no judgments at {judgments_path}"})
                continue
            mine = judged[
                (judged["system"] == name)
                & judged["primary"].astype(bool)
                & (judged["vote"] == 0)
                & judged["conversation_id"].isin(list(conversations))
            ]
            if mine.empty:
                rows.append({**row, "status": f"missing: {name} not judged on the subset"})
                continue
            status = "measured"
            if judge_model:
                by_wanted = mine["judge_model"].astype(str).map(canonical_name)
                if by_wanted.eq(canonical_name(judge_model)).any():
                    mine = mine[by_wanted.eq(canonical_name(judge_model))]
                else:
                    judges = ", ".join(sorted(set(mine["judge_model"].astype(str))))
                    status = f"measured by {judges}, not the study's judge {judge_model}"
            correct = mine["label"].astype(str).str.upper().eq("CORRECT")
            low, high = cluster_bootstrap_interval(
                correct, mine["conversation_id"], n_resamples=n_resamples, seed=seed
            )
            rows.append(
                {
                    **row,
                    "accuracy": float(correct.mean()),
                    "accuracy_low": low,
                    "accuracy_high": high,
                    "questions": int(len(mine)),
                    "judge_model": str(mine["judge_model"].iloc[0]),
                    "backend": str(mine["backend"].iloc[0]),
                    "status": status,
                }
            )
    return pd.DataFrame(rows)


ANSWER_STAGES = ("answer",)
INGEST_STAGES = ("ingest_extract", "ingest_update", "observer", "reflector")
GROUP = ["system", "model", "reasoning_effort"]


def exponents_vs_published(exponents: pd.DataFrame) -> pd.DataFrame:
    """Table 1 next to the study's ranges: one row per group and quantity, with the measured
    value, the published range and whether the value lies inside it."""
    quantities = ("p", "q", "r2", "loocv_mape", "r2_total")
    rows = []
    for rec in exponents.to_dict("records"):
        ranges = study.EXPONENTS.get(rec["system"], {})
        if rec["system"] in study.MEMORY_LOOCV_MAPE:
            ranges = {"loocv_mape": study.MEMORY_LOOCV_MAPE[rec["system"]]}
        for name in quantities:
            rng = ranges.get(name)
            value = float(rec[name])
            rows.append(
                {
                    "source": rec.get("source", "synthetic"),
                    **{k: rec[k] for k in GROUP},
                    "quantity": name,
                    "measured": value,
                    "published": f"{rng[0]:g}–{rng[1]:g}" if rng else "",
                    "inside": (rng[0] <= round(value, 3) <= rng[1]) if rng else None,
                }
            )
    return pd.DataFrame(rows)


def _ratio(num: pd.Series, den: pd.Series) -> pd.Series:
    return (num / den.where(den > 0)).astype(float)


def gamma_zeta(rows: pd.DataFrame) -> pd.DataFrame:
    """The study's Table 7: γ = output / input tokens, ζ = reasoning / visible output tokens,
    for answering (``_ans``) and ingest (``_ing``: extraction, update, observer, reflector)."""
    out = []
    for key, part in rows.groupby(GROUP, sort=True):
        row = dict(zip(GROUP, key, strict=True))
        for suffix, stages in (("ans", ANSWER_STAGES), ("ing", INGEST_STAGES)):
            mine = part[part["stage"].isin(stages)]
            total = mine[["prompt_tokens", "output_tokens", "reasoning_tokens"]].sum()
            row[f"input_{suffix}"] = int(total["prompt_tokens"])
            output = float(total["output_tokens"] + total["reasoning_tokens"])
            row[f"gamma_{suffix}"] = (
                output / total["prompt_tokens"] if total["prompt_tokens"] else np.nan
            )
            row[f"zeta_{suffix}"] = (
                float(total["reasoning_tokens"]) / total["output_tokens"]
                if total["output_tokens"]
                else np.nan
            )
        out.append(row)
    return pd.DataFrame(out)


def conversation_costs(turns: pd.DataFrame) -> pd.DataFrame:
    """Ĉ: the mean dollar cost of serving one whole conversation, per cell and system."""
    per_run = (
        turns.groupby(["run", "source", *GROUP, "cell", "n_turns", "mean_tokens"], sort=True)
        .agg(usd=("usd", "sum"), tokens=("C", "sum"))
        .reset_index()
    )
    return (
        per_run.groupby(["source", *GROUP, "cell", "n_turns", "mean_tokens"], sort=True)
        .agg(
            runs=("run", "nunique"),
            usd_per_conversation=("usd", "mean"),
            input_tokens_per_conversation=("tokens", "mean"),
        )
        .reset_index()
    )


def cpa_table(costs: pd.DataFrame, accuracy: pd.DataFrame, cell: str) -> pd.DataFrame:
    """The study's Tables 3-4 at one cell: CPA = Ĉ / Âcc; empty accuracy stays missing."""
    mine = costs[(costs["cell"] == cell) & (costs["source"] == "synthetic")]
    keep = [
        "system",
        "model",
        "judged_system",
        "accuracy",
        "accuracy_low",
        "accuracy_high",
        "questions",
        "status",
    ]
    merged = mine.merge(accuracy[keep], on=["system", "model"], how="left")
    merged["status"] = merged["status"].fillna("missing: no accuracy for this model")
    acc = pd.to_numeric(merged["accuracy"], errors="coerce")
    merged["cpa_usd"] = merged["usd_per_conversation"] / acc.where(acc > 0)
    return merged[
        [
            "cell",
            *GROUP,
            "runs",
            "usd_per_conversation",
            "judged_system",
            "accuracy",
            "accuracy_low",
            "accuracy_high",
            "questions",
            "cpa_usd",
            "status",
        ]
    ]


def residuals_by_cell(turns: pd.DataFrame, fits: dict[str, object]) -> pd.DataFrame:
    """Log residual of every turn under its group's separable fit, with its cell."""
    parts = []
    for system, fitted in fits.items():
        mine = turns[turns["system"] == system]
        predicted = fitted.predict(mine)  # type: ignore[attr-defined]
        parts.append(
            pd.DataFrame(
                {
                    "system": system,
                    "cell": mine["cell"].to_numpy(),
                    "residual": np.log(mine["C"].to_numpy(float) + 1) - np.log(predicted + 1),
                }
            )
        )
    return (
        pd.concat(parts, ignore_index=True)
        if parts
        else pd.DataFrame(columns=["system", "cell", "residual"])
    )


def gates_fired(rows: pd.DataFrame) -> pd.DataFrame:
    """Per memory system and cell: runs, and how often each ingest gate fired (in all and per
    run): Mem0's extraction, Hindsight's retain and observational memory's observer and
    reflector."""
    memory = rows.loc[rows["system"].isin(["mem0", "observational", "hindsight"])]
    if memory.empty:
        return pd.DataFrame(columns=["system", "cell", "runs", "stage", "fired", "per_run"])
    memory = memory.assign(
        run=memory[["model", "reasoning_effort", "seed", "conversation_id"]]
        .astype(str)
        .agg("/".join, axis=1)
    )
    runs = memory.groupby(["system", "cell"])["run"].nunique().rename("runs")
    stages = memory.loc[memory["stage"].isin(["ingest_extract", "observer", "reflector"])]
    # a gate fires once per turn, whatever number of segments its ingest was cut into
    stages = stages.drop_duplicates(["system", "cell", "stage", "run", "turn"])
    counts = stages.groupby(["system", "cell", "stage"]).size().rename("fired").reset_index()
    expected = [
        (s, c, g)
        for (s, c) in runs.index
        for g in (("observer", "reflector") if s == "observational" else ("ingest_extract",))
    ]
    full = (
        pd.DataFrame(expected, columns=["system", "cell", "stage"])
        .merge(counts, how="left", on=["system", "cell", "stage"])
        .fillna({"fired": 0})
    )
    full = full.merge(runs.reset_index(), on=["system", "cell"])
    full["fired"] = full["fired"].astype(int)
    full["per_run"] = full["fired"] / full["runs"]
    return full[["system", "cell", "runs", "stage", "fired", "per_run"]]
