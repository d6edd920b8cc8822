"""What a run cost, cut the way the paper reports it (§4.2): notebook 05's section 2 and 6.5-6.6.

Per stage, per user (conversation), per question, a summary with totals, per-conversation and
per-query costs and requests against questions; the measured share of long-context input billed
as cached; token ratios per stage; and cost per correct answer from the judge's majority votes.
Every table has a ``basis`` column that says whether its records are measured or offline
estimates.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd

from memcost import stats
from memcost.answers import JUDGMENT_FIELDS, primary, read_run_judgments
from memcost.costs.ledger import TOKEN_COLUMNS, basis_of, workload
from memcost.paths import RunPaths


# ---------------------------------------------------------------------------------------------
# Tables
# ---------------------------------------------------------------------------------------------
def _aggregate(frame: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Sums, counts and latency percentiles per group (groups with null keys kept)."""
    if frame.empty:
        return pd.DataFrame(
            columns=[
                *keys,
                "records",
                "api_requests",
                "conversations",
                "questions",
                *TOKEN_COLUMNS,
                "cost_usd",
                "spent_usd",
                "errors",
                "cache_hits",
                "basis",
            ]
        )
    grouped = frame.groupby(keys, dropna=False, sort=True)
    out = grouped.agg(
        records=("stage", "size"),
        api_requests=("attempts", "sum"),
        conversations=("conversation_id", "nunique"),
        questions=("question_id", "nunique"),
        prompt_tokens=("prompt_tokens", "sum"),
        cached_prompt_tokens=("cached_prompt_tokens", "sum"),
        completion_tokens=("completion_tokens", "sum"),
        reasoning_tokens=("reasoning_tokens", "sum"),
        cost_usd=("cost_usd", "sum"),
        spent_usd=("spent_usd", "sum"),
        errors=("has_error", "sum"),
        cache_hits=("cached", "sum"),
    )
    # pandas' own group quantiles: a Python call per group made notebook 05 spend most of its
    # time here on a dataset of thousands of questions
    out["latency_p50_s"] = grouped["latency_s"].quantile(0.5)
    out["latency_p95_s"] = grouped["latency_s"].quantile(0.95)
    out["basis"] = grouped["is_estimate"].agg(basis_of)
    return out.reset_index()


def stage_costs(priced: pd.DataFrame) -> pd.DataFrame:
    """Cost per dataset, stage, system and model (long context per model and per system)."""
    work = workload(priced)
    out = _aggregate(work, ["dataset", "phase", "stage", "answer_system", "price_model"])
    out = out.rename(columns={"answer_system": "system", "price_model": "model"})
    return out


def memory_system(work: pd.DataFrame) -> pd.Series:
    """The memory system of each write or read record: its ``system`` tag, or ``memory`` (the
    paper's writes carry none); ``None`` for long context and the judge."""
    memory = work["phase"].isin(["write", "read"])
    return work["answer_system"].where(work["answer_system"].notna(), "memory").where(memory)


def user_costs(priced: pd.DataFrame) -> pd.DataFrame:
    """Cost per dataset and conversation (the paper's "per user"): one column per phase/system.

    Columns: ``write_usd``, ``read_usd`` (memory), ``<system>_usd`` per long-context variant,
    ``judge_usd``, ``total_usd``, ``questions``.
    """
    work = workload(priced).loc[lambda f: f["conversation_id"].notna()]
    if work.empty:
        return pd.DataFrame(columns=["dataset", "conversation_id", "questions", "total_usd"])
    label = work["phase"].where(work["phase"] != "long_context", work["answer_system"])
    label = label.fillna(work["phase"]).astype(str)
    other = work["phase"].isin(["write", "read"]) & ~memory_system(work).eq("memory")
    label = label.where(~other, label + "_" + memory_system(work).astype(str)) + "_usd"
    table = (
        work.assign(component=label)
        .groupby(["dataset", "conversation_id", "component"])["cost_usd"]
        .sum()
        .unstack("component", fill_value=0.0)
    )
    table.columns = [str(c) for c in table.columns]
    ordered = [c for c in ("write_usd", "read_usd") if c in table.columns]
    ordered += sorted(c for c in table.columns if c not in (*ordered, "judge_usd"))
    ordered += ["judge_usd"] if "judge_usd" in table.columns else []
    table = table[ordered]
    table["total_usd"] = table.sum(axis=1)
    questions = work.groupby(["dataset", "conversation_id"])["question_id"].nunique()
    table.insert(0, "questions", questions.reindex(table.index).fillna(0).astype(int))
    basis = work.groupby(["dataset", "conversation_id"])["is_estimate"].agg(basis_of)
    table["basis"] = basis.reindex(table.index)
    return table.reset_index()


def question_costs(priced: pd.DataFrame) -> pd.DataFrame:
    """Cost of answering each question, per system (judge calls excluded)."""
    work = workload(priced)
    work = work.loc[work["question_id"].notna() & work["phase"].isin(["read", "long_context"])]
    out = _aggregate(work, ["dataset", "conversation_id", "question_id", "answer_system"])
    out = out.rename(columns={"answer_system": "system"})
    return out.drop(columns=["conversations", "questions"], errors="ignore")


def summary_table(priced: pd.DataFrame) -> pd.DataFrame:
    """The paper's §4.2 in one table per dataset: each component's total, per conversation, per
    query and per request, tokens, and requests against questions (retries and errors make
    requests exceed questions)."""
    work = workload(priced)
    rows = []
    for dataset, everything in work.groupby("dataset", dropna=False, sort=True):
        conversations = everything["conversation_id"].nunique()
        mine = memory_system(everything)
        # the paper's components are its memory's; each other memory system gets its own two
        frame = everything.loc[mine.isna() | mine.eq("memory")]
        components: list[tuple[str, pd.DataFrame]] = [
            ("write: fact extraction", frame.loc[frame["stage"] == "extract"]),
            ("write: update phase", frame.loc[frame["stage"] == "update"]),
            (
                "write: fact embeddings",
                frame.loc[(frame["stage"] == "embed") & (frame["phase"] == "write")],
            ),
            ("write: total", frame.loc[frame["phase"] == "write"]),
            ("read: memory answers (incl. query embeddings)", frame.loc[frame["phase"] == "read"]),
        ]
        lc = frame.loc[frame["phase"] == "long_context"]
        for system, part in lc.groupby("answer_system", sort=True):
            models = ", ".join(sorted(part["price_model"].dropna().unique()))
            components.append((f"answer: {system} ({models})", part))
        components.append(("judge", frame.loc[frame["phase"] == "judge"]))
        for system in sorted(set(mine.dropna()) - {"memory"}):
            part = everything.loc[mine.eq(system)]
            components.append((f"write: {system}", part.loc[part["phase"] == "write"]))
            components.append((f"read: {system}", part.loc[part["phase"] == "read"]))
        for name, part in components:
            if part.empty:
                continue
            total = float(part["cost_usd"].sum())
            questions = int(part["question_id"].nunique())
            requests = int(part["attempts"].sum())
            per_conv_base = part["conversation_id"].nunique() or conversations
            rows.append(
                {
                    "dataset": dataset,
                    "component": name,
                    "total_usd": total,
                    "spent_usd": float(part["spent_usd"].sum()),
                    "conversations": int(part["conversation_id"].nunique()),
                    "usd_per_conversation": total / per_conv_base if per_conv_base else np.nan,
                    "questions": questions,
                    "usd_per_question": total / questions if questions else np.nan,
                    "api_requests": requests,
                    "usd_per_request": total / requests if requests else np.nan,
                    "errors": int(part["has_error"].sum()),
                    "prompt_tokens": int(part["prompt_tokens"].sum()),
                    "cached_prompt_tokens": int(part["cached_prompt_tokens"].sum()),
                    "completion_tokens": int(part["completion_tokens"].sum()),
                    "reasoning_tokens": int(part["reasoning_tokens"].sum()),
                    "total_tokens": int(
                        part["prompt_tokens"].sum() + part["completion_tokens"].sum()
                    ),
                    "basis": basis_of(part["is_estimate"]),
                }
            )
    return pd.DataFrame(rows)


def ordered(frame: pd.DataFrame) -> pd.DataFrame:
    """Ledger order: by run, then timestamp, then line (a stable order for "first question")."""
    return frame.sort_values(["run", "timestamp", "line"], na_position="last", kind="stable")


def lc_cached_share(priced: pd.DataFrame) -> pd.DataFrame:
    """Measured share of long-context input billed as cached, per dataset, system and model.

    ``share_after_first`` looks only at the second and later questions of each conversation,
    where the cost model assumes the whole context is cached (100%).
    """
    lc = ordered(workload(priced).loc[lambda f: f["phase"] == "long_context"])
    if lc.empty:
        return pd.DataFrame(
            columns=[
                "dataset",
                "system",
                "model",
                "calls",
                "prompt_tokens",
                "cached_prompt_tokens",
                "cached_share",
                "later_calls",
                "share_after_first",
                "assumed_share",
                "basis",
            ]
        )
    first = ~lc.duplicated(subset=["dataset", "answer_system", "conversation_id"], keep="first")
    lc = lc.assign(is_first=first)
    rows = []
    for (dataset, system, model), part in lc.groupby(
        ["dataset", "answer_system", "price_model"], dropna=False, sort=True
    ):
        later = part.loc[~part["is_first"]]
        rows.append(
            {
                "dataset": dataset,
                "system": system,
                "model": model,
                "calls": len(part),
                "prompt_tokens": int(part["prompt_tokens"].sum()),
                "cached_prompt_tokens": int(part["cached_prompt_tokens"].sum()),
                "cached_share": _ratio(
                    part["cached_prompt_tokens"].sum(), part["prompt_tokens"].sum()
                ),
                "later_calls": len(later),
                "share_after_first": _ratio(
                    later["cached_prompt_tokens"].sum(), later["prompt_tokens"].sum()
                ),
                "assumed_share": 1.0,
                "basis": basis_of(part["is_estimate"]),
            }
        )
    return pd.DataFrame(rows)


def _ratio(numerator: float, denominator: float) -> float:
    return float(numerator) / float(denominator) if denominator else np.nan


def token_ratios(priced: pd.DataFrame) -> pd.DataFrame:
    """γ = output / input tokens and ζ = reasoning / visible output tokens, per stage and model.

    Completion tokens include reasoning tokens (as the API reports them), so visible output is
    ``completion − reasoning``.
    """
    work = workload(priced)
    if work.empty:
        return pd.DataFrame(
            columns=[
                "stage",
                "model",
                "calls",
                "prompt_tokens",
                "completion_tokens",
                "reasoning_tokens",
                "visible_tokens",
                "gamma",
                "zeta",
                "basis",
            ]
        )
    grouped = work.groupby(["stage", "price_model"], dropna=False, sort=True)
    out = grouped.agg(
        calls=("stage", "size"),
        prompt_tokens=("prompt_tokens", "sum"),
        completion_tokens=("completion_tokens", "sum"),
        reasoning_tokens=("reasoning_tokens", "sum"),
    )
    out["visible_tokens"] = out["completion_tokens"] - out["reasoning_tokens"]
    out["gamma"] = out["completion_tokens"] / out["prompt_tokens"].where(out["prompt_tokens"] > 0)
    out["zeta"] = out["reasoning_tokens"] / out["visible_tokens"].where(out["visible_tokens"] > 0)
    out["basis"] = grouped["is_estimate"].agg(basis_of)
    return out.reset_index().rename(columns={"price_model": "model"})


def run_judgments(run_dirs: Iterable[str | os.PathLike[str] | RunPaths]) -> pd.DataFrame:
    """Every dataset's votes in the given runs (read by :mod:`memcost.answers`), concatenated."""
    frames = []
    for run_dir in run_dirs:
        run = run_dir if isinstance(run_dir, RunPaths) else RunPaths.from_param(run_dir)
        frame = read_run_judgments(run)
        if not frame.empty:
            frames.append(frame)
    if not frames:
        return pd.DataFrame(columns=["dataset", *JUDGMENT_FIELDS])
    return pd.concat(frames, ignore_index=True)


def majority_votes(judgments: pd.DataFrame) -> pd.DataFrame:
    """One row per (dataset, system, question): correct when most judged votes say CORRECT.

    ``UNJUDGED`` votes (a judge call that failed) count for neither side; a question with no
    judged vote is not correct. When ``judgments.jsonl`` also holds the votes of the judge-
    sensitivity prompts, only the primary prompt's votes (``primary = true``, the ones Table 3
    reports) count. The vote counting itself is :func:`memcost.stats.majority_votes`.
    """
    if "primary" in judgments.columns and not judgments.empty:
        judgments = primary(judgments.assign(primary=judgments["primary"].fillna(True)))
    return stats.majority_votes(judgments, ["dataset", "system", "question_id"])


def cost_per_correct(priced: pd.DataFrame, votes: pd.DataFrame) -> pd.DataFrame:
    """Cost per correct answer (CPA = mean cost per question ÷ accuracy) per dataset and system.

    ``cpa_usd`` counts only answering (memory reads, long-context calls); for memory,
    ``cpa_with_write_usd`` also spreads the write cost over the dataset's questions.
    """
    if votes.empty:
        return pd.DataFrame(
            columns=[
                "dataset",
                "system",
                "questions",
                "correct",
                "accuracy",
                "answer_usd",
                "usd_per_question",
                "cpa_usd",
                "cpa_with_write_usd",
                "basis",
            ]
        )
    work = workload(priced)
    rows = [
        _cost_per_correct_row(work, dataset, system, part)
        for (dataset, system), part in votes.groupby(["dataset", "system"], sort=True)
    ]
    return pd.DataFrame(rows)


def _cost_per_correct_row(
    work: pd.DataFrame, dataset: str, system: str, part: pd.DataFrame
) -> dict[str, Any]:
    """One system's accuracy on one dataset (``part``: its majority votes) against its cost."""
    mine = work.loc[
        (work["dataset"] == dataset)
        & (work["answer_system"] == system)
        & work["phase"].isin(["read", "long_context"])
    ]
    questions = len(part)
    correct = int(part["correct"].sum())
    accuracy = correct / questions if questions else np.nan
    answered = mine["question_id"].nunique()
    answer_usd = float(mine["cost_usd"].sum())
    per_question = answer_usd / answered if answered else np.nan
    cpa = per_question / accuracy if accuracy else np.nan
    with_write = np.nan
    if system == "memory" and answered:
        write_usd = float(
            work.loc[(work["dataset"] == dataset) & (work["phase"] == "write"), "cost_usd"].sum()
        )
        with_write = (answer_usd + write_usd) / answered / accuracy if accuracy else np.nan
    return {
        "dataset": dataset,
        "system": system,
        "questions": questions,
        "correct": correct,
        "accuracy": accuracy,
        "answer_usd": answer_usd if answered else np.nan,
        "usd_per_question": per_question,
        "cpa_usd": cpa,
        "cpa_with_write_usd": with_write,
        "basis": basis_of(mine["is_estimate"]) if answered else "no ledger records",
    }
