"""The cost model's constants measured on a run's ledger: notebook 05's section 6.3.

Per dataset and long-context system: the write cost per conversation, the read cost per
question, the first and later long-context calls, the constants as functions of ``L``, and each
user's first and sustained break-even on their actual question-by-question costs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from memcost.catalog import price_for
from memcost.costs.growth import first_break_even, sustained_break_even, token_break_even
from memcost.costs.ledger import basis_of, workload
from memcost.costs.measured import lc_cached_share, memory_system, ordered
from memcost.costs.model import CostConstants, CostModel


def measured_cost_model(
    priced: pd.DataFrame,
    dataset: str,
    lc_system: str,
    *,
    price_overrides: Mapping[str, Mapping[str, Any]] | None = None,
    memory: str = "memory",
    work: pd.DataFrame | None = None,
) -> tuple[CostModel, dict[str, Any]]:
    """The four constants of the cost model measured on one dataset of a run.

    ``C_write`` = write-phase cost per conversation; ``C_read`` = read-phase cost per question;
    ``C_first`` = mean cost of each conversation's first long-context call of ``lc_system``;
    ``C_cached`` = mean cost of the later calls. When every conversation has a single question
    (LongMemEval) there are no later calls: ``C_cached`` is then the first calls' tokens with the
    whole prompt priced as cached — the paper's own assumption, stated in the details.
    ``work`` is the dataset's :func:`dataset_workload` when the caller has it already.
    """
    work, write, read, lc = _phases(priced, dataset, lc_system, memory, work)
    conversations = write["conversation_id"].nunique()
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
    """One dataset's workload records in ledger order."""
    return ordered(workload(priced).loc[lambda f: f["dataset"] == dataset])


def _phases(
    priced: pd.DataFrame,
    dataset: str,
    lc_system: str,
    memory: str = "memory",
    work: pd.DataFrame | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """One dataset's workload in ledger order, and the write and read records of the memory
    system ``memory`` and the ``lc_system`` records."""
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
    missing = [
        name for name, part in (("write", write), ("read", read), (lc_system, lc)) if part.empty
    ]
    if missing:
        raise ValueError(
            f"dataset {dataset!r}: no ledger records for {', '.join(missing)}; "
            "cannot measure the cost model"
        )
    return work, write, read, lc


def _later_turn_cost(
    lc: pd.DataFrame,
    first: pd.DataFrame,
    later: pd.DataFrame,
    price_overrides: Mapping[str, Mapping[str, Any]] | None,
) -> tuple[float, str]:
    """``C_cached`` and where it comes from: the later calls, or the first calls repriced."""
    # The offline backend has no provider prompt cache: its later calls report no cached tokens,
    # which says nothing about a real provider. Price them with the paper's assumption instead.
    offline_uncached = bool(lc["is_estimate"].all()) and int(lc["cached_prompt_tokens"].sum()) == 0
    if not later.empty and not offline_uncached:
        return float(later["cost_usd"].mean()), f"measured: {len(later)} later calls"
    price = price_for(str(first["model"].iloc[0]), price_overrides)
    lc_cached = float(
        np.mean(
            [
                price.cost(prompt_tokens=p, cached_prompt_tokens=p, completion_tokens=c)
                for p, c in zip(first["prompt_tokens"], first["completion_tokens"], strict=True)
            ]
        )
    )
    source = "assumed: first calls repriced with the whole prompt cached" + (
        " (offline backend: no provider cache to measure)" if offline_uncached else ""
    )
    return lc_cached, source


def _token_details(
    write: pd.DataFrame, read: pd.DataFrame, lc: pd.DataFrame, conversations: int
) -> dict[str, float]:
    """Tokens ingested per conversation, read per question and sent per long-context call, and
    the token-level break-even they imply."""
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
    return details


def measured_constants(
    priced: pd.DataFrame,
    dataset: str,
    lc_system: str,
    *,
    price_overrides: Mapping[str, Mapping[str, Any]] | None = None,
) -> tuple[CostConstants, dict[str, Any]]:
    """The cost model's constants as functions of ``L``, measured on one dataset of a run.

    Write cost per history token (write cost per conversation ÷ mean first-turn context),
    read cost per question, mean long-context output tokens, the measured cached share from the
    second question on (1.0, the paper's assumption, when there is no second question), and the
    long-context model's prices from the price table.
    """
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
    memory: str = "memory",
    work: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Per conversation, the question-by-question cost of the memory system ``memory`` and of
    one long-context system.

    Memory pays the conversation's whole write cost with its first question, then one read per
    question; long context pays each call as it came. Questions are in ledger order. ``work``
    is the dataset's :func:`dataset_workload` when the caller has it already.
    """
    work = dataset_workload(priced, dataset) if work is None else work
    mine = memory_system(work) == memory
    write = work.loc[(work["phase"] == "write") & mine].groupby("conversation_id")["cost_usd"].sum()
    read = work.loc[(work["phase"] == "read") & mine].groupby("question_id")["cost_usd"].sum()
    lc = work.loc[(work["phase"] == "long_context") & (work["answer_system"] == lc_system)]
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
    """The cost model measured for every dataset and long-context system of the ledger, and each
    user's first and sustained break-even on the question-by-question costs.

    Returns ``(models, users, skipped)``: one row per dataset × long-context system (the measured
    constants and the break-even they imply), one row per user × system, and a message for each
    pair that could not be measured (e.g. no memory reads in that dataset).
    """
    work = workload(priced)
    lc_calls = work.loc[work["phase"] == "long_context"]
    systems = sorted(lc_calls["answer_system"].dropna().unique())
    memories = sorted(set(memory_system(work).dropna()), key=lambda m: (m != "memory", m))
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
        series = per_user_series(priced, dataset, system, memory, work=by_dataset[dataset])
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
    """Per dataset × system: how many users, and their median first and sustained break-even."""
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
    """One row per dataset and memory system of :func:`measured_break_even`'s table: write and
    read cost and the break-even against each long-context system (``None``: never within the
    measured questions), labelled with the ``prices`` they are at."""
    be = (
        table.set_index(["dataset", "memory_system", "lc_system"])["break_even_n"]
        .unstack("lc_system")
        .add_prefix("break_even_vs_")
    )
    sizes = table.groupby(["dataset", "memory_system"])[["write_usd", "read_usd"]].first()
    return sizes.join(be).reset_index().assign(prices=prices)
