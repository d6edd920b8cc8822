"""The serving study's tables, from the priced turn rows (no model calls, no llm imports)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from memcost import paper

ANSWER_STAGES = ("answer",)
INGEST_STAGES = ("ingest_extract", "ingest_update", "observer", "reflector")
GROUP = ["system", "model", "reasoning_effort"]


def exponents_vs_published(exponents: pd.DataFrame) -> pd.DataFrame:
    """Table 1 next to the study's ranges: one row per group and quantity, with the measured
    value, the published range and whether the value lies inside it."""
    quantities = ("p", "q", "r2", "loocv_mape", "r2_total")
    rows = []
    for rec in exponents.to_dict("records"):
        ranges = paper.EXPONENTS.get(rec["system"], {})
        if rec["system"] in paper.MEMORY_LOOCV_MAPE:
            ranges = {"loocv_mape": paper.MEMORY_LOOCV_MAPE[rec["system"]]}
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


def token_ratios(rows: pd.DataFrame) -> pd.DataFrame:
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
    run): Mem0's extraction and observational memory's observer and reflector."""
    memory = rows.loc[rows["system"].isin(["mem0", "observational"])]
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
