"""What a run cost, cut as the paper reports it (paper §4.2), and the cost model's constants
measured on it (notebook 05)."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import pandas as pd

from memcost import stats
from memcost.answers import (
    JUDGMENT_FIELDS,
    in_system_order,
    primary,
    read_run_judgments,
    system_label,
)
from memcost.calls import SHARED_PREFIX_TAG
from memcost.catalog import list_usd, price_for
from memcost.costs.break_even import first_break_even, sustained_break_even
from memcost.costs.ledger import TOKEN_COLUMNS, basis_of, workload
from memcost.costs.model import CostConstants, CostModel, token_break_even
from memcost.paper import PAPER_MEMORY
from memcost.paths import RunPaths


# ---------------------------------------------------------------------------------------------
# Tables
# ---------------------------------------------------------------------------------------------
def _aggregate(frame: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Sums, counts and latency percentiles per group (null keys kept)."""
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
    work = workload(priced)
    out = _aggregate(work, ["dataset", "phase", "stage", "answer_system", "price_model"])
    out = out.rename(columns={"answer_system": "system", "price_model": "model"})
    return in_system_order(out, ["dataset", "phase", "stage", "system", "model"])


def memory_system(work: pd.DataFrame) -> pd.Series:
    """The memory system of each write or read record (untagged: the paper's); ``None`` for the
    others."""
    memory = work["phase"].isin(["write", "read"])
    return work["answer_system"].where(work["answer_system"].notna(), PAPER_MEMORY).where(memory)


def user_costs(priced: pd.DataFrame) -> pd.DataFrame:
    """Cost per dataset and conversation (the paper's "per user"): ``write_usd``, ``read_usd``,
    ``<system>_usd`` per long-context system, ``judge_usd``, ``total_usd``, ``questions``."""
    work = workload(priced).loc[lambda f: f["conversation_id"].notna()]
    if work.empty:
        return pd.DataFrame(columns=["dataset", "conversation_id", "questions", "total_usd"])
    label = work["phase"].where(work["phase"] != "long_context", work["answer_system"])
    label = label.fillna(work["phase"]).astype(str)
    other = work["phase"].isin(["write", "read"]) & ~memory_system(work).eq(PAPER_MEMORY)
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
    work = workload(priced)
    work = work.loc[work["question_id"].notna() & work["phase"].isin(["read", "long_context"])]
    out = _aggregate(work, ["dataset", "conversation_id", "question_id", "answer_system"])
    out = out.rename(columns={"answer_system": "system"})
    out = in_system_order(out, ["dataset", "conversation_id", "question_id", "system"])
    return out.drop(columns=["conversations", "questions"], errors="ignore")


def component_label(component: str, *, offline: bool = False) -> str:
    """A :func:`summary_table` component as a reader sees it: ``answer: long context, gpt-5-mini``;
    offline, ``answer: long context (offline), priced as gpt-5-mini``."""
    stage, _, rest = component.partition(": ")
    if stage in ("write", "read") and rest.startswith("memory_"):
        return f"{stage}: {system_label(rest, offline=offline)}"
    if stage != "answer" or not rest:
        return component
    system, _, model = rest.partition(" (")
    if offline and model:
        return f"answer: {system_label(system, offline=True)}, priced as {model.rstrip(')')}"
    return f"answer: {system_label(system)}"


def summary_table(priced: pd.DataFrame) -> pd.DataFrame:
    """The paper's §4.2 in one table per dataset: each component's total, per conversation, per
    query and per request, tokens, and requests against questions."""
    work = workload(priced)
    rows = []
    for dataset, everything in work.groupby("dataset", dropna=False, sort=True):
        conversations = everything["conversation_id"].nunique()
        mine = memory_system(everything)
        # the paper's components are its memory's; each other memory system gets its own two
        frame = everything.loc[mine.isna() | mine.eq(PAPER_MEMORY)]
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
        for system in sorted(set(mine.dropna()) - {PAPER_MEMORY}):
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
    return frame.sort_values(["run", "timestamp", "line"], na_position="last", kind="stable")


def lc_cached_share(priced: pd.DataFrame) -> pd.DataFrame:
    """Measured share of long-context input billed as cached, per dataset, system and model;
    ``share_after_first``: the later questions of each conversation, which the cost model assumes
    wholly cached."""
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
    """γ = output / input tokens and ζ = reasoning / visible output tokens (completion minus
    reasoning), per stage and model."""
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
    """One row per dataset, system and question, correct when most judged votes of the primary judge
    prompt say so (``UNJUDGED`` counts for neither side)."""
    if "primary" in judgments.columns and not judgments.empty:
        judgments = primary(judgments.assign(primary=judgments["primary"].fillna(True)))
    return stats.majority_votes(judgments, ["dataset", "system", "question_id"])


def cost_per_correct(priced: pd.DataFrame, votes: pd.DataFrame) -> pd.DataFrame:
    """Cost per correct answer (mean cost per question ÷ accuracy) per dataset and system; for
    memory, ``cpa_with_write_usd`` also spreads the write over the questions."""
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
    return in_system_order(pd.DataFrame(rows), ["dataset", "system"])


def _cost_per_correct_row(
    work: pd.DataFrame, dataset: str, system: str, part: pd.DataFrame
) -> dict[str, Any]:
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
    if system == PAPER_MEMORY and answered:
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


def measured_cost_model(
    priced: pd.DataFrame,
    dataset: str,
    lc_system: str,
    *,
    price_overrides: Mapping[str, Mapping[str, Any]] | None = None,
    memory: str = PAPER_MEMORY,
    work: pd.DataFrame | None = None,
) -> tuple[CostModel, dict[str, Any]]:
    """The four constants of the cost model measured on one dataset: ``C_write`` per conversation,
    ``C_read`` per question, ``C_first`` and ``C_cached`` the mean first and later calls of
    ``lc_system``. Without later calls (LongMemEval), ``C_cached`` is the first calls with the
    whole prompt cached: the paper's assumption, stated in the details."""
    work, write, read, lc = _phases(priced, dataset, lc_system, memory, work)
    read = served_reads(read, price_overrides)
    conversations = (read if write.empty else write)["conversation_id"].nunique()
    questions = read["question_id"].nunique()
    first_mask = ~lc.duplicated(subset=["conversation_id"], keep="first")
    first, later = lc.loc[first_mask], lc.loc[~first_mask]
    per_call = lc.groupby(["conversation_id", "question_id"], dropna=False, sort=False)
    details: dict[str, Any] = {
        "dataset": dataset,
        "memory_system": memory,
        "lc_system": lc_system,
        "conversations": int(conversations),
        "questions": int(questions),
        "lc_calls": len(lc),
        "lc_questions": int(per_call.ngroups),
        "context_tokens": float(first["prompt_tokens"].mean()),
        "lc_output_tokens": float(lc["completion_tokens"].mean()),
        "basis": basis_of(work["is_estimate"]),
    }
    lc_cached, details["lc_cached_from"] = _later_turn_cost(lc, first, later, price_overrides)
    model = CostModel(
        write_usd=float(write["cost_usd"].sum()) / conversations,
        read_usd=float(read["cost_usd"].sum()) / questions,
        lc_first_usd=float(first["cost_usd"].mean()),
        lc_cached_usd=lc_cached,
        context_tokens=details["context_tokens"],
        source=f"measured on {dataset} ({details['basis']})",
    )
    details.update(_token_details(write, read, lc, conversations))
    details["break_even_n"] = model.break_even()
    return model, details


def dataset_workload(priced: pd.DataFrame, dataset: str) -> pd.DataFrame:
    return ordered(workload(priced).loc[lambda f: f["dataset"] == dataset])


def _phases(
    priced: pd.DataFrame,
    dataset: str,
    lc_system: str,
    memory: str = PAPER_MEMORY,
    work: pd.DataFrame | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """A dataset's workload in ledger order, and the write and read records of ``memory`` and the
    records of ``lc_system``."""
    if priced.empty:
        raise ValueError(
            "measuring the cost model needs a calls.sqlite with records (none found in these "
            "runs); use the paper's constants, or point run_dir at a run with a ledger"
        )
    work = dataset_workload(priced, dataset) if work is None else work
    if work.empty:
        raise ValueError(f"no ledger records for dataset {dataset!r}")
    mine = memory_system(work) == memory
    write = work.loc[(work["phase"] == "write") & mine]
    read = work.loc[(work["phase"] == "read") & mine]
    lc = work.loc[(work["phase"] == "long_context") & (work["answer_system"] == lc_system)]
    # A memory that writes nothing until a gate (observational memory below observer_tokens)
    # makes no write call: built without one, it answered; its write costs nothing. The
    # paper's memory always extracts, so its missing writes are a ledger without them.
    unwritten = write.empty and not read.empty and memory != PAPER_MEMORY
    missing = [
        name
        for name, part in (("write", write), ("read", read), (lc_system, lc))
        if part.empty and not (name == "write" and unwritten)
    ]
    if missing:
        raise ValueError(
            f"dataset {dataset!r}: no ledger records for {', '.join(missing)}; "
            "cannot measure the cost model"
        )
    return work, write, read, lc


def _offline_uncached(lc: pd.DataFrame) -> bool:
    """The offline backend reports no cached tokens, which says nothing of a provider: its later
    calls are priced with the paper's assumption instead."""
    return bool(lc["is_estimate"].all()) and int(lc["cached_prompt_tokens"].sum()) == 0


def served_reads(
    read: pd.DataFrame, price_overrides: Mapping[str, Mapping[str, Any]] | None
) -> pd.DataFrame:
    """Memory reads priced as a provider's cache would serve them where the run had none (offline):
    the prefix a reader call shares with the user's earlier one (``shared_prefix_tokens``) as
    cached."""
    if SHARED_PREFIX_TAG not in read.columns or read.empty:
        return read
    shared = pd.to_numeric(read[SHARED_PREFIX_TAG], errors="coerce").fillna(0).astype("int64")
    served = read["is_estimate"] & (read["cached_prompt_tokens"] == 0) & (shared > 0)
    if not served.any():
        return read
    cost = cost_with_cached(read, shared, price_overrides)
    return read.assign(cost_usd=np.where(served, cost, read["cost_usd"]))


def cost_with_cached(
    calls: pd.DataFrame, cached: Any, price_overrides: Mapping[str, Mapping[str, Any]] | None
) -> np.ndarray:
    """Each call's list price with ``cached`` of its prompt tokens priced as a cache hit."""
    prices = {m: price_for(str(m), price_overrides) for m in calls["model"].unique()}
    uncached, hits, output = list_usd(
        prices, calls["model"], calls["prompt_tokens"], cached, calls["completion_tokens"]
    )
    return uncached + hits + output


def _later_turn_cost(
    lc: pd.DataFrame,
    first: pd.DataFrame,
    later: pd.DataFrame,
    price_overrides: Mapping[str, Mapping[str, Any]] | None,
) -> tuple[float, str]:
    """``C_cached`` and where it comes from: the later calls, or the first calls repriced."""
    offline_uncached = _offline_uncached(lc)
    if not later.empty and not offline_uncached:
        return float(later["cost_usd"].mean()), f"measured: {len(later)} later calls"
    # the paper's assumption for a long-context question after the first: all of it cached
    lc_cached = float(np.mean(cost_with_cached(first, first["prompt_tokens"], price_overrides)))
    source = "assumed: first calls repriced with the whole prompt cached" + (
        " (offline backend: no provider cache to measure)" if offline_uncached else ""
    )
    return lc_cached, source


def _token_details(
    write: pd.DataFrame, read: pd.DataFrame, lc: pd.DataFrame, conversations: int
) -> dict[str, float]:
    """Tokens ingested per conversation, read per question and sent per long-context call, and the
    token-level break-even they imply."""
    details = {
        "ingestion_tokens_per_conversation": float(
            (write["prompt_tokens"].sum() + write["completion_tokens"].sum()) / conversations
        ),
        "read_prompt_tokens_per_question": float(
            read.groupby("question_id")["prompt_tokens"].sum().mean()
        ),
        "lc_prompt_tokens_per_question": float(lc["prompt_tokens"].mean()),
    }
    details["token_break_even"] = token_break_even(
        details["ingestion_tokens_per_conversation"],
        details["lc_prompt_tokens_per_question"],
        details["read_prompt_tokens_per_question"],
    )
    # cognee's token-cost note counts the model's tokens only, not the embeddings': its
    # convention, beside this repository's, so its 23-26 queries can be compared
    written = write.loc[write["stage"] != "embed"]
    details["token_break_even_without_embeddings"] = token_break_even(
        float(
            (written["prompt_tokens"].sum() + written["completion_tokens"].sum()) / conversations
        ),
        details["lc_prompt_tokens_per_question"],
        details["read_prompt_tokens_per_question"],
    )
    return details


def measured_constants(
    priced: pd.DataFrame,
    dataset: str,
    lc_system: str,
    *,
    price_overrides: Mapping[str, Mapping[str, Any]] | None = None,
) -> tuple[CostConstants, dict[str, Any]]:
    """The cost model's constants as functions of ``L``, measured on one dataset: write cost per
    history token, read cost per question, long-context output tokens, the cached share from the
    second question (1.0 without one), the model's prices."""
    model, details = measured_cost_model(
        priced, dataset, lc_system, price_overrides=price_overrides
    )
    work = workload(priced)
    lc = work.loc[(work["dataset"] == dataset) & (work["answer_system"] == lc_system)]
    share = lc_cached_share(lc)
    later = share["later_calls"].sum() if not share.empty else 0
    measurable = later and not details["lc_cached_from"].startswith("assumed")
    cached_share = float(share["share_after_first"].iloc[0]) if measurable else 1.0
    price = price_for(str(lc["model"].iloc[0]), price_overrides)
    constants = CostConstants.for_price(
        price,
        write_usd_per_token=model.write_usd / details["context_tokens"],
        read_usd=model.read_usd,
        output_tokens=details["lc_output_tokens"],
        cached_share=cached_share,
        source=model.source,
    )
    details["cached_share"] = cached_share
    return constants, details


def per_user_series(
    priced: pd.DataFrame,
    dataset: str,
    lc_system: str,
    memory: str = PAPER_MEMORY,
    work: pd.DataFrame | None = None,
    price_overrides: Mapping[str, Mapping[str, Any]] | None = None,
) -> pd.DataFrame:
    """Per conversation, the question-by-question cost of ``memory`` (its whole write with the first
    question, then its reads) and of one long-context system (offline: the whole prompt cached
    from the second question, as ``C_cached`` is), in ledger order."""
    work = dataset_workload(priced, dataset) if work is None else work
    mine = memory_system(work) == memory
    write = work.loc[(work["phase"] == "write") & mine].groupby("conversation_id")["cost_usd"].sum()
    read = served_reads(work.loc[(work["phase"] == "read") & mine], price_overrides)
    read = read.groupby("question_id")["cost_usd"].sum()
    lc = work.loc[(work["phase"] == "long_context") & (work["answer_system"] == lc_system)]
    if not lc.empty and _offline_uncached(lc):
        later = lc["question_id"] != lc.groupby("conversation_id")["question_id"].transform("first")
        cached = cost_with_cached(lc, lc["prompt_tokens"], price_overrides)
        lc = lc.assign(cost_usd=np.where(later, cached, lc["cost_usd"]))
    lc = lc.groupby(["conversation_id", "question_id"], sort=False)["cost_usd"].sum().reset_index()
    rows = []
    for conversation, part in lc.groupby("conversation_id", sort=True):
        part = part.loc[part["question_id"].isin(read.index)]
        for turn, (question, lc_cost) in enumerate(
            zip(part["question_id"], part["cost_usd"], strict=True), start=1
        ):
            rows.append(
                {
                    "conversation_id": conversation,
                    "turn": turn,
                    "question_id": question,
                    "memory_usd": float(read[question])
                    + (float(write.get(conversation, 0.0)) if turn == 1 else 0.0),
                    "long_context_usd": float(lc_cost),
                }
            )
    return pd.DataFrame(
        rows, columns=["conversation_id", "turn", "question_id", "memory_usd", "long_context_usd"]
    )


def measured_break_even(
    priced: pd.DataFrame, price_overrides: Mapping[str, Mapping[str, Any]] | None = None
) -> tuple[pd.DataFrame, pd.DataFrame, list[str]]:
    """The cost model measured for every dataset, memory and long-context system of the ledger, and
    each user's first and sustained break-even: ``(models, users, skipped)``, the last a message
    per pair that could not be measured."""
    work = workload(priced)
    lc_calls = work.loc[work["phase"] == "long_context"]
    systems = sorted(lc_calls["answer_system"].dropna().unique())
    memories = sorted(set(memory_system(work).dropna()), key=lambda m: (m != PAPER_MEMORY, m))
    model_rows: list[dict[str, Any]] = []
    user_rows: list[dict[str, Any]] = []
    skipped: list[str] = []
    datasets = sorted(work["dataset"].dropna().unique())
    by_dataset = {d: dataset_workload(priced, d) for d in datasets}  # sorted once, not per pair
    pairs = [(d, m, s) for d in datasets for m in memories for s in systems]
    for dataset, memory, system in pairs:
        try:
            model, details = measured_cost_model(
                priced,
                dataset,
                system,
                price_overrides=price_overrides,
                memory=memory,
                work=by_dataset[dataset],
            )
        except ValueError as exc:
            skipped.append(f"{dataset}/{memory}/{system}: {exc}")
            continue
        series = per_user_series(
            priced,
            dataset,
            system,
            memory,
            work=by_dataset[dataset],
            price_overrides=price_overrides,
        )
        for conversation, part in series.groupby("conversation_id"):
            user_rows.append(
                {
                    "dataset": dataset,
                    "memory_system": memory,
                    "system": system,
                    "conversation_id": conversation,
                    "questions": len(part),
                    "first_break_even": first_break_even(
                        part["memory_usd"], part["long_context_usd"]
                    ),
                    "sustained_break_even": sustained_break_even(
                        part["memory_usd"], part["long_context_usd"]
                    ),
                }
            )
        model_rows.append(
            {
                **details,
                "write_usd": model.write_usd,
                "read_usd": model.read_usd,
                "lc_first_usd": model.lc_first_usd,
                "lc_cached_usd": model.lc_cached_usd,
            }
        )
    return pd.DataFrame(model_rows), pd.DataFrame(user_rows), skipped


def break_even_by_user_summary(users: pd.DataFrame) -> pd.DataFrame:
    if users.empty:
        return users
    differs = users["first_break_even"].ne(users["sustained_break_even"])
    return (
        users.assign(differs=differs)
        .groupby(["dataset", "memory_system", "system"])
        .agg(
            users=("conversation_id", "size"),
            questions_per_user=("questions", "median"),
            median_first=("first_break_even", "median"),
            median_sustained=("sustained_break_even", "median"),
            users_never=("sustained_break_even", lambda s: int(s.isna().sum())),
            users_first_differs=("differs", "sum"),
        )
    )


def per_memory_system(table: pd.DataFrame, prices: str) -> pd.DataFrame:
    """One row per dataset and memory system: write and read cost and the break-even against each
    long-context system (``None``: never within the questions), at ``prices``."""
    be = (
        table.set_index(["dataset", "memory_system", "lc_system"])["break_even_n"]
        .unstack("lc_system")
        .add_prefix("break_even_vs_")
    )
    sizes = table.groupby(["dataset", "memory_system"])[["write_usd", "read_usd"]].first()
    table = sizes.join(be).reset_index().assign(prices=prices)
    return in_system_order(table, ["dataset", "memory_system"])


def write_cost_lines(per_system: pd.DataFrame) -> list[str]:
    """Each other system's write cost per user against the paper's memory, in words read from the
    table."""
    lines = []
    for (dataset, prices), part in per_system.groupby(["dataset", "prices"], sort=False):
        paper_write = part.loc[part["memory_system"] == PAPER_MEMORY, "write_usd"]
        if paper_write.empty or not float(paper_write.iloc[0]) > 0:
            continue
        base = float(paper_write.iloc[0])
        for rec in part.loc[part["memory_system"] != PAPER_MEMORY].to_dict("records"):
            ratio = float(rec["write_usd"]) / base
            side = "more" if ratio > 1 else "less" if ratio < 1 else "as much"
            lines.append(
                f"{dataset}, {prices} prices: {rec['memory_system']} writes "
                f"${float(rec['write_usd']):.4f} per user, {ratio:.2f}x the paper's memory "
                f"(${base:.4f}): it pays {side} up front"
            )
    return lines
