"""Measured costs: the usage ledgers (``calls.jsonl``) of one or more runs, priced.

Every model call leaves one ledger record with its token counts; this module prices each record
with :mod:`memcost.prices` and cuts the result the way the paper reports it (§4.2): per stage,
per user (conversation), per question, and a summary with totals, per-conversation and per-query
costs, token counts and requests against questions.

Records from the offline backend carry o200k counts of the prompt and of the text the classical
method returned; they are priced as the configured models and every table built from them says
**estimate** in its ``basis`` column.

Two kinds of double counting are avoided: a record served from the local request cache
(``cached = true``) whose call (request and tags, the ledger's identity) already has a record
earlier in the same run is a *replay* (a resumed run) and is left out of the workload; and cache
hits cost nothing in ``spent_usd``, though their original usage still counts in ``cost_usd``
(what the workload costs). The same request made for another item (two systems giving the same
answer to the judge, a rolling window that holds the whole history) is a call of its own: served
from the cache, it is part of the workload but not of the spend.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import pandas as pd

from memcost import stats
from memcost.calls import BASE_FIELDS, OFFLINE, STANDARD_TAGS, record_call_key
from memcost.costs import CostConstants, CostModel, token_break_even
from memcost.io import read_jsonl
from memcost.models import slug
from memcost.paths import RunPaths
from memcost.prices import price_for

# The ledger schema is the client's: one definition, read here.
LEDGER_COLUMNS = (*BASE_FIELDS, *STANDARD_TAGS)
TOKEN_COLUMNS = ("prompt_tokens", "cached_prompt_tokens", "completion_tokens", "reasoning_tokens")
TAG_COLUMNS = ("stage", "model", "backend", "dataset", "conversation_id", "question_id", "system")
WRITE_STAGES = ("extract", "update")  # plus embeddings of facts (embed records without a question)
ESTIMATE = "estimate (offline token counts priced as the configured models)"
MEASURED = "measured"
ESTIMATE_NOTE = (
    "ESTIMATE: these records come from the offline backend; token counts are o200k counts of the "
    "prompts and of the offline methods' outputs, priced as the configured models."
)


# ---------------------------------------------------------------------------------------------
# Loading and pricing
# ---------------------------------------------------------------------------------------------
def _empty_ledger() -> pd.DataFrame:
    return pd.DataFrame(
        {c: pd.Series(dtype="object") for c in (*LEDGER_COLUMNS, "run", "line", "call_key")}
    )


def load_ledger(run_dirs: Iterable[str | os.PathLike[str] | RunPaths]) -> pd.DataFrame:
    """The ledgers of the given runs, concatenated, with ``run`` and ``line`` columns added.

    A run without ``calls.jsonl`` contributes nothing (the caller reports which runs had none,
    see :func:`ledger_paths`). Missing fields become nulls / zeros, never errors: the ledger may
    come from an older client version.
    """
    frames = []
    for run_dir in run_dirs:
        run = run_dir if isinstance(run_dir, RunPaths) else RunPaths.from_param(run_dir)
        records = read_jsonl(run.calls, missing_ok=True)
        if not records:
            continue
        frame = pd.DataFrame.from_records(records)
        frame["run"] = str(run.root)
        frame["line"] = np.arange(len(frame))
        frame["call_key"] = [record_call_key(r) for r in records]
        frames.append(frame)
    if not frames:
        return normalise_ledger(_empty_ledger())
    return normalise_ledger(pd.concat(frames, ignore_index=True))


def ledger_paths(run_dirs: Iterable[str | os.PathLike[str] | RunPaths]) -> dict[str, bool]:
    """``{calls.jsonl path: exists}`` for each run, for the notebook's notes."""
    out = {}
    for run_dir in run_dirs:
        run = run_dir if isinstance(run_dir, RunPaths) else RunPaths.from_param(run_dir)
        out[str(run.calls)] = run.calls.is_file()
    return out


def normalise_ledger(frame: pd.DataFrame) -> pd.DataFrame:
    """Every schema column present, tokens as integers, flags as booleans, tags as strings."""
    frame = frame.copy()
    for column in (*LEDGER_COLUMNS, "run", "line", "call_key"):
        if column not in frame.columns:
            frame[column] = None
    for column in TOKEN_COLUMNS:
        frame[column] = pd.to_numeric(frame[column], errors="coerce").fillna(0).astype("int64")
    frame["attempts"] = pd.to_numeric(frame["attempts"], errors="coerce").fillna(1).astype("int64")
    frame["latency_s"] = pd.to_numeric(frame["latency_s"], errors="coerce").astype("float64")
    frame["cached"] = frame["cached"].map(lambda v: bool(v) if pd.notna(v) else False).astype(bool)
    frame["line"] = pd.to_numeric(frame["line"], errors="coerce").fillna(0).astype("int64")
    for column in (
        *TAG_COLUMNS, "request_hash", "call_key", "error", "run", "prompt_version", "provider"
    ):
        frame[column] = (
            frame[column].map(lambda v: None if _missing(v) else str(v)).astype("string")
        )
    frame["has_error"] = frame["error"].notna() & (frame["error"] != "")
    return frame


def _missing(value: Any) -> bool:
    if value is None:
        return True
    if isinstance(value, float) and np.isnan(value):
        return True
    return value is pd.NA or (isinstance(value, str) and value == "")


def phase_of(stage: str | None, question_id: str | None) -> str:
    """Which side of the cost model a call belongs to: write, read, long_context, judge.

    Fact embeddings (no question) are part of writing memory; query embeddings (tagged with a
    question) are part of reading it.
    """
    if stage in WRITE_STAGES:
        return "write"
    if stage == "embed":
        return "read" if question_id else "write"
    if stage == "read":
        return "read"
    return stage or "unknown"


def answer_system(
    stage: str | None, system: str | None, model: str | None, phase: str
) -> str | None:
    """The system whose answers a call produced (``memory``, ``long_context_<slug>``, …)."""
    if system:
        return system
    if phase == "read":
        return "memory"
    if stage == "long_context" and model:
        return f"long_context_{slug(model)}"
    return None


def price_calls(
    calls: pd.DataFrame,
    price_overrides: Mapping[str, Mapping[str, Any]] | None = None,
) -> pd.DataFrame:
    """Add what each record costs at the price table's prices.

    Columns added: ``price_model``, ``input_usd``, ``cached_input_usd``, ``output_usd``,
    ``cost_usd`` (the record's tokens at list price), ``spent_usd`` (zero for local cache hits,
    offline calls and failed calls),
    ``workload`` (false for replays of a request already recorded earlier in the same run),
    ``phase``, ``answer_system``, ``is_estimate``. A model without a price raises
    :class:`memcost.prices.UnknownPriceError` naming the model and the table.
    """
    priced = normalise_ledger(calls) if "has_error" not in calls.columns else calls.copy()
    if priced.empty:
        for column in ("input_usd", "cached_input_usd", "output_usd", "cost_usd", "spent_usd"):
            priced[column] = pd.Series(dtype="float64")
        for column in ("workload", "is_estimate"):
            priced[column] = pd.Series(dtype=bool)
        for column in ("price_model", "phase", "answer_system"):
            priced[column] = pd.Series(dtype="string")
        return priced
    if priced["model"].isna().any():
        lines = priced.loc[priced["model"].isna(), "line"].head(3).tolist()
        raise ValueError(f"ledger records without a model cannot be priced (lines {lines})")
    prices = {m: price_for(m, price_overrides) for m in priced["model"].unique()}
    rate_in = priced["model"].map(lambda m: prices[m].input).astype(float)
    rate_cached = priced["model"].map(lambda m: prices[m].cached_rate).astype(float)
    rate_out = priced["model"].map(lambda m: prices[m].output).astype(float)
    cached_tokens = priced[["cached_prompt_tokens", "prompt_tokens"]].min(axis=1)
    priced["price_model"] = priced["model"].map(lambda m: prices[m].model).astype("string")
    priced["input_usd"] = (priced["prompt_tokens"] - cached_tokens) * rate_in / 1e6
    priced["cached_input_usd"] = cached_tokens * rate_cached / 1e6
    priced["output_usd"] = priced["completion_tokens"] * rate_out / 1e6
    priced["cost_usd"] = priced["input_usd"] + priced["cached_input_usd"] + priced["output_usd"]
    # What this run paid: the same rule as the client's budget (memcost.llm.ledger.is_paid), so a
    # cache hit, an offline call or a failed call costs nothing here.
    paid = ~priced["cached"] & (priced["backend"] != OFFLINE) & ~priced["has_error"]
    priced["spent_usd"] = priced["cost_usd"].where(paid.fillna(False).astype(bool), 0.0)
    stages, questions = _values(priced["stage"]), _values(priced["question_id"])
    phases = [phase_of(st, q) for st, q in zip(stages, questions, strict=True)]
    priced["phase"] = pd.Series(phases, index=priced.index, dtype="string")
    priced["answer_system"] = pd.Series(
        [
            answer_system(st, sy, mo, ph)
            for st, sy, mo, ph in zip(
                stages, _values(priced["system"]), _values(priced["model"]), phases, strict=True
            )
        ],
        index=priced.index,
        dtype="string",
    )
    priced["is_estimate"] = (priced["backend"] == "offline").fillna(False).astype(bool)
    priced["workload"] = ~_replays(priced)
    return priced


def _values(series: pd.Series) -> list[Any]:
    """Plain Python values with ``None`` for missing ones (pandas' NA is not a boolean)."""
    return [None if pd.isna(v) else v for v in series]


def _replays(priced: pd.DataFrame) -> pd.Series:
    """Cache hits of a call that already has a record earlier in the same run.

    A call is what the ledger's checkpoint counts once: the request hash with the record's tags
    (:func:`memcost.llm.ledger.record_call_key`). By the request hash alone, a request that two
    items share (the judge asked about the same answer of two systems) would lose its second
    item from the workload whenever the cache served it.
    """
    identity = priced["call_key"].fillna(priced["request_hash"])
    keyed = priced.assign(identity=identity)
    ordered = keyed.sort_values(["run", "line"])
    seen = ordered.loc[ordered["identity"].notna()].duplicated(subset=["run", "identity"])
    replay = pd.Series(False, index=priced.index)
    replay.loc[seen.index] = seen.to_numpy() & priced.loc[seen.index, "cached"].to_numpy()
    return replay


def workload(priced: pd.DataFrame) -> pd.DataFrame:
    """The records that make up the runs' work (replays of a resumed run left out)."""
    return priced.loc[priced["workload"]]


def basis_of(is_estimate: pd.Series) -> str:
    """``measured``, ``estimate (…)`` or ``mixed (…)`` for a group of records."""
    if len(is_estimate) == 0:
        return MEASURED
    if is_estimate.all():
        return ESTIMATE
    if is_estimate.any():
        return "mixed: some records are offline estimates"
    return MEASURED


def is_estimate(priced: pd.DataFrame) -> bool:
    """True when any record comes from the offline backend."""
    return bool(len(priced)) and bool(priced["is_estimate"].any())


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
        latency_p50_s=("latency_s", lambda s: s.quantile(0.5)),
        latency_p95_s=("latency_s", lambda s: s.quantile(0.95)),
    )
    out["basis"] = grouped["is_estimate"].agg(basis_of)
    return out.reset_index()


def stage_costs(priced: pd.DataFrame) -> pd.DataFrame:
    """Cost per dataset, stage, system and model (long context per model and per system)."""
    work = workload(priced)
    out = _aggregate(work, ["dataset", "phase", "stage", "answer_system", "price_model"])
    out = out.rename(columns={"answer_system": "system", "price_model": "model"})
    return out


def user_costs(priced: pd.DataFrame) -> pd.DataFrame:
    """Cost per dataset and conversation (the paper's "per user"): one column per phase/system.

    Columns: ``write_usd``, ``read_usd`` (memory), ``<system>_usd`` per long-context variant,
    ``judge_usd``, ``total_usd``, ``questions``.
    """
    work = workload(priced).loc[lambda f: f["conversation_id"].notna()]
    if work.empty:
        return pd.DataFrame(columns=["dataset", "conversation_id", "questions", "total_usd"])
    label = work["phase"].where(work["phase"] != "long_context", work["answer_system"])
    label = label.fillna(work["phase"]).astype(str) + "_usd"
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
    for dataset, frame in work.groupby("dataset", dropna=False, sort=True):
        conversations = frame["conversation_id"].nunique()
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


def _ordered(frame: pd.DataFrame) -> pd.DataFrame:
    """Ledger order: by run, then timestamp, then line (a stable order for "first question")."""
    return frame.sort_values(["run", "timestamp", "line"], na_position="last", kind="stable")


def lc_cached_share(priced: pd.DataFrame) -> pd.DataFrame:
    """Measured share of long-context input billed as cached, per dataset, system and model.

    ``share_after_first`` looks only at the second and later questions of each conversation,
    where the cost model assumes the whole context is cached (100%).
    """
    lc = _ordered(workload(priced).loc[lambda f: f["phase"] == "long_context"])
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


# ---------------------------------------------------------------------------------------------
# The cost model's constants, measured
# ---------------------------------------------------------------------------------------------
def measured_cost_model(
    priced: pd.DataFrame,
    dataset: str,
    lc_system: str,
    *,
    price_overrides: Mapping[str, Mapping[str, Any]] | None = None,
) -> tuple[CostModel, dict[str, Any]]:
    """The four constants of the cost model measured on one dataset of a run.

    ``C_write`` = write-phase cost per conversation; ``C_read`` = read-phase cost per question;
    ``C_first`` = mean cost of each conversation's first long-context call of ``lc_system``;
    ``C_cached`` = mean cost of the later calls. When every conversation has a single question
    (LongMemEval) there are no later calls: ``C_cached`` is then the first calls' tokens with the
    whole prompt priced as cached — the paper's own assumption, stated in the details.
    """
    work = _ordered(workload(priced).loc[lambda f: f["dataset"] == dataset])
    if work.empty:
        raise ValueError(f"no ledger records for dataset {dataset!r}")
    write = work.loc[work["phase"] == "write"]
    read = work.loc[work["phase"] == "read"]
    lc = work.loc[(work["phase"] == "long_context") & (work["answer_system"] == lc_system)]
    missing = [
        name for name, part in (("write", write), ("read", read), (lc_system, lc)) if part.empty
    ]
    if missing:
        raise ValueError(
            f"dataset {dataset!r}: no ledger records for {', '.join(missing)}; "
            "cannot measure the cost model"
        )
    conversations = write["conversation_id"].nunique()
    questions = read["question_id"].nunique()
    first_mask = ~lc.duplicated(subset=["conversation_id"], keep="first")
    first, later = lc.loc[first_mask], lc.loc[~first_mask]
    per_call = lc.groupby(["conversation_id", "question_id"], dropna=False, sort=False)
    details: dict[str, Any] = {
        "dataset": dataset,
        "lc_system": lc_system,
        "conversations": int(conversations),
        "questions": int(questions),
        "lc_calls": len(lc),
        "lc_questions": int(per_call.ngroups),
        "context_tokens": float(first["prompt_tokens"].mean()),
        "lc_output_tokens": float(lc["completion_tokens"].mean()),
        "basis": basis_of(work["is_estimate"]),
    }
    # The offline backend has no provider prompt cache: its later calls report no cached tokens,
    # which says nothing about a real provider. Price them with the paper's assumption instead.
    offline_uncached = bool(lc["is_estimate"].all()) and int(lc["cached_prompt_tokens"].sum()) == 0
    if later.empty or offline_uncached:
        model_name = str(first["model"].iloc[0])
        price = price_for(model_name, price_overrides)
        lc_cached = float(
            np.mean(
                [
                    price.cost(prompt_tokens=p, cached_prompt_tokens=p, completion_tokens=c)
                    for p, c in zip(first["prompt_tokens"], first["completion_tokens"], strict=True)
                ]
            )
        )
        details["lc_cached_from"] = "assumed: first calls repriced with the whole prompt cached" + (
            " (offline backend: no provider cache to measure)" if offline_uncached else ""
        )
    else:
        lc_cached = float(later["cost_usd"].mean())
        details["lc_cached_from"] = f"measured: {len(later)} later calls"
    model = CostModel(
        write_usd=float(write["cost_usd"].sum()) / conversations,
        read_usd=float(read["cost_usd"].sum()) / questions,
        lc_first_usd=float(first["cost_usd"].mean()),
        lc_cached_usd=lc_cached,
        context_tokens=details["context_tokens"],
        source=f"measured on {dataset} ({details['basis']})",
    )
    details["ingestion_tokens_per_conversation"] = float(
        (write["prompt_tokens"].sum() + write["completion_tokens"].sum()) / conversations
    )
    details["read_prompt_tokens_per_question"] = float(
        read.groupby("question_id")["prompt_tokens"].sum().mean()
    )
    details["lc_prompt_tokens_per_question"] = float(lc["prompt_tokens"].mean())
    details["token_break_even"] = token_break_even(
        details["ingestion_tokens_per_conversation"],
        details["lc_prompt_tokens_per_question"],
        details["read_prompt_tokens_per_question"],
    )
    details["break_even_n"] = model.break_even()
    return model, details


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


def per_user_series(priced: pd.DataFrame, dataset: str, lc_system: str) -> pd.DataFrame:
    """Per conversation, the question-by-question cost of memory and of one long-context system.

    Memory pays the conversation's whole write cost with its first question, then one read per
    question; long context pays each call as it came. Questions are in ledger order.
    """
    work = _ordered(workload(priced).loc[lambda f: f["dataset"] == dataset])
    write = work.loc[work["phase"] == "write"].groupby("conversation_id")["cost_usd"].sum()
    read = work.loc[work["phase"] == "read"].groupby("question_id")["cost_usd"].sum()
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
    from memcost.costs import first_break_even, sustained_break_even

    work = workload(priced)
    lc_calls = work.loc[work["phase"] == "long_context"]
    systems = sorted(lc_calls["answer_system"].dropna().unique())
    model_rows: list[dict[str, Any]] = []
    user_rows: list[dict[str, Any]] = []
    skipped: list[str] = []
    for dataset in sorted(work["dataset"].dropna().unique()):
        for system in systems:
            try:
                model, details = measured_cost_model(priced, dataset, system,
                                                     price_overrides=price_overrides)
            except ValueError as exc:
                skipped.append(f"{dataset}/{system}: {exc}")
                continue
            series = per_user_series(priced, dataset, system)
            for conversation, part in series.groupby("conversation_id"):
                user_rows.append({
                    "dataset": dataset, "system": system, "conversation_id": conversation,
                    "questions": len(part),
                    "first_break_even": first_break_even(part["memory_usd"],
                                                         part["long_context_usd"]),
                    "sustained_break_even": sustained_break_even(part["memory_usd"],
                                                                 part["long_context_usd"]),
                })
            model_rows.append({**details, "write_usd": model.write_usd, "read_usd": model.read_usd,
                               "lc_first_usd": model.lc_first_usd,
                               "lc_cached_usd": model.lc_cached_usd})
    return pd.DataFrame(model_rows), pd.DataFrame(user_rows), skipped


def break_even_by_user_summary(users: pd.DataFrame) -> pd.DataFrame:
    """Per dataset × system: how many users, and their median first and sustained break-even."""
    if users.empty:
        return users
    differs = users["first_break_even"].ne(users["sustained_break_even"])
    return users.assign(differs=differs).groupby(["dataset", "system"]).agg(
        users=("conversation_id", "size"), questions_per_user=("questions", "median"),
        median_first=("first_break_even", "median"),
        median_sustained=("sustained_break_even", "median"),
        users_never=("sustained_break_even", lambda s: int(s.isna().sum())),
        users_first_differs=("differs", "sum"))


# ---------------------------------------------------------------------------------------------
# Judgments: cost per correct answer
# ---------------------------------------------------------------------------------------------
def load_judgments(run_dirs: Iterable[str | os.PathLike[str] | RunPaths]) -> pd.DataFrame:
    """Every dataset's ``judgments.jsonl`` in the given runs, with a ``dataset`` column."""
    frames = []
    for run_dir in run_dirs:
        run = run_dir if isinstance(run_dir, RunPaths) else RunPaths.from_param(run_dir)
        if not run.root.is_dir():
            continue
        for folder in sorted(p for p in run.root.iterdir() if p.is_dir()):
            path = run.dataset(folder.name).judgments
            records = read_jsonl(path, missing_ok=True)
            if records:
                frame = pd.DataFrame.from_records(records)
                frame["dataset"] = folder.name
                frames.append(frame)
    if not frames:
        return pd.DataFrame(
            columns=["dataset", "question_id", "conversation_id", "system", "vote", "label"]
        )
    return pd.concat(frames, ignore_index=True)


def majority_votes(judgments: pd.DataFrame) -> pd.DataFrame:
    """One row per (dataset, system, question): correct when most judged votes say CORRECT.

    ``UNJUDGED`` votes (a judge call that failed) count for neither side; a question with no
    judged vote is not correct. When ``judgments.jsonl`` also holds the votes of the judge-
    sensitivity prompts, only the primary prompt's votes (``primary = true``, the ones Table 3
    reports) count. The vote counting itself is :func:`memcost.stats.majority_votes`.
    """
    if "primary" in judgments.columns and not judgments.empty:
        judgments = judgments.loc[judgments["primary"].fillna(True).astype(bool)]
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
    rows = []
    for (dataset, system), part in votes.groupby(["dataset", "system"], sort=True):
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
                work.loc[
                    (work["dataset"] == dataset) & (work["phase"] == "write"), "cost_usd"
                ].sum()
            )
            with_write = (answer_usd + write_usd) / answered / accuracy if accuracy else np.nan
        rows.append(
            {
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
        )
    return pd.DataFrame(rows)


def ledger_from_records(records: Iterable[Mapping[str, Any]], run: str = "run") -> pd.DataFrame:
    """A normalised ledger from in-memory records (for examples and tests)."""
    records = list(records)
    frame = pd.DataFrame.from_records(records)
    frame["run"] = run
    frame["line"] = np.arange(len(frame))
    frame["call_key"] = [record_call_key(r) for r in records]
    return normalise_ledger(frame)
