"""The store of calls loaded and priced (notebook 05, section 2), and the latency per system and
stage."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from memcost.answers import answer_systems, load_answers, system_kind
from memcost.calls import BASE_FIELDS, OFFLINE, STANDARD_TAGS, read_calls, record_call_key
from memcost.catalog import list_usd, price_for, price_successor, slug
from memcost.paper import PAPER_MEMORY
from memcost.paths import RunPaths

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


def _empty_ledger() -> pd.DataFrame:
    return pd.DataFrame(
        {c: pd.Series(dtype="object") for c in (*LEDGER_COLUMNS, "run", "line", "call_key")}
    )


def load_ledger(run_dirs: Iterable[str | os.PathLike[str] | RunPaths]) -> pd.DataFrame:
    """The ledgers of the given runs with ``run`` and ``line`` columns (a run without
    ``calls.sqlite`` adds nothing; missing fields are nulls)."""
    frames = []
    for run_dir in run_dirs:
        run = run_dir if isinstance(run_dir, RunPaths) else RunPaths.from_param(run_dir)
        records = read_calls(run.root)
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
    out = {}
    for run_dir in run_dirs:
        run = run_dir if isinstance(run_dir, RunPaths) else RunPaths.from_param(run_dir)
        out[str(run.calls)] = run.calls.is_file()
    return out


def normalise_ledger(frame: pd.DataFrame) -> pd.DataFrame:
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
        *TAG_COLUMNS,
        "request_hash",
        "call_key",
        "error",
        "run",
        "prompt_version",
        "provider",
    ):
        text = frame[column].astype("string")  # None, NaN and NA alike become <NA>
        frame[column] = text.mask(text == "")  # an empty tag is a missing one
    frame["has_error"] = frame["error"].notna() & (frame["error"] != "")
    return frame


def phase_of(stage: str | None, question_id: str | None) -> str:
    """write, read, long_context or judge: an embedding with a question reads memory, one without
    writes it."""
    if stage in WRITE_STAGES:
        return "write"
    if stage == "embed":
        return "read" if question_id else "write"
    if stage == "read":
        return "read"
    return stage or "unknown"


def as_successors(ledger: pd.DataFrame) -> pd.DataFrame:
    """Each retired model replaced by its successor: the same tokens billed as today's
    models would."""
    successors = {model: price_successor(model) for model in ledger["model"].unique()}
    return ledger.assign(model=ledger["model"].map(successors))


def answer_system(
    stage: str | None, system: str | None, model: str | None, phase: str
) -> str | None:
    if system:
        return system
    if phase == "read":
        return PAPER_MEMORY
    if stage == "long_context" and model:
        return f"long_context_{slug(model)}"
    return None


def price_calls(
    calls: pd.DataFrame,
    price_overrides: Mapping[str, Mapping[str, Any]] | None = None,
    *,
    on: str | None = None,
) -> pd.DataFrame:
    """Each record priced from the price table (``on``: the rows in force that day):
    ``price_model``, ``price_date``, ``input_usd``, ``cached_input_usd``, ``output_usd``,
    ``cost_usd`` (list price times its execution's multiplier), ``spent_usd`` (what was paid),
    ``workload``, ``phase``, ``answer_system``, ``is_estimate``; an unpriced model raises
    :class:`memcost.catalog.UnknownPriceError`."""
    priced = normalise_ledger(calls) if "has_error" not in calls.columns else calls.copy()
    if priced.empty:
        return _with_empty_price_columns(priced)
    if priced["model"].isna().any():
        lines = priced.loc[priced["model"].isna(), "line"].head(3).tolist()
        raise ValueError(f"ledger records without a model cannot be priced (lines {lines})")
    prices = {m: price_for(m, price_overrides, on=on) for m in priced["model"].unique()}
    _add_list_prices(priced, prices)
    priced["spent_usd"] = _spent_usd(priced)
    _label_phases(priced)
    priced["is_estimate"] = (priced["backend"] == "offline").fillna(False).astype(bool)
    priced["workload"] = ~_replays(priced)
    return priced


def _with_empty_price_columns(priced: pd.DataFrame) -> pd.DataFrame:
    for column in ("input_usd", "cached_input_usd", "output_usd", "cost_usd", "spent_usd"):
        priced[column] = pd.Series(dtype="float64")
    for column in ("workload", "is_estimate"):
        priced[column] = pd.Series(dtype=bool)
    for column in ("price_model", "price_date", "phase", "answer_system"):
        priced[column] = pd.Series(dtype="string")
    return priced


def _add_list_prices(priced: pd.DataFrame, prices: Mapping[str, Any]) -> None:
    priced["price_model"] = priced["model"].map(lambda m: prices[m].model).astype("string")
    priced["price_date"] = priced["model"].map(lambda m: prices[m].date).astype("string")
    usd = list_usd(
        prices,
        priced["model"],
        priced["prompt_tokens"],
        priced["cached_prompt_tokens"],
        priced["completion_tokens"],
    )
    for column, values in zip(("input_usd", "cached_input_usd", "output_usd"), usd, strict=True):
        priced[column] = pd.Series(values, index=priced.index)
    # A call sent through the Batch API or Flex processing (``execution``) costs its multiple.
    if "execution" in priced.columns:
        factor = pd.Series(
            [
                prices[m].execution_rate(e if isinstance(e, str) else "")
                for m, e in zip(priced["model"], priced["execution"], strict=True)
            ],
            index=priced.index,
            dtype=float,
        )
        for column in ("input_usd", "cached_input_usd", "output_usd"):
            priced[column] = priced[column] * factor
    priced["cost_usd"] = priced["input_usd"] + priced["cached_input_usd"] + priced["output_usd"]


def _spent_usd(priced: pd.DataFrame) -> pd.Series:
    """What was paid for each record, by the budget's rule (:func:`memcost.calls.is_paid`), or the
    provider's ``billed_usd``."""
    billed_tokens = (priced["prompt_tokens"] + priced["completion_tokens"]) > 0
    paid = (
        (
            ~priced["cached"]
            & (priced["backend"] != OFFLINE)
            & (~priced["has_error"] | billed_tokens)
        )
        .fillna(False)
        .astype(bool)
    )
    charged = (
        pd.to_numeric(priced["billed_usd"], errors="coerce")
        if ("billed_usd" in priced.columns)
        else pd.Series(np.nan, index=priced.index)
    )
    return charged.where(charged.notna(), priced["cost_usd"]).where(paid, 0.0)


def _label_phases(priced: pd.DataFrame) -> None:
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


def _values(series: pd.Series) -> list[Any]:
    return series.astype(object).where(series.notna(), None).tolist()


def _replays(priced: pd.DataFrame) -> pd.Series:
    """Cache hits of a call already recorded earlier in the same run, by request hash and tags (by
    hash alone, two items that share a request would lose the second)."""
    identity = priced["call_key"].fillna(priced["request_hash"])
    keyed = priced.assign(identity=identity)
    ordered = keyed.sort_values(["run", "line"])
    seen = ordered.loc[ordered["identity"].notna()].duplicated(subset=["run", "identity"])
    replay = pd.Series(False, index=priced.index)
    replay.loc[seen.index] = seen.to_numpy() & priced.loc[seen.index, "cached"].to_numpy()
    return replay


def workload(priced: pd.DataFrame) -> pd.DataFrame:
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
    return bool(len(priced)) and bool(priced["is_estimate"].any())


def ledger_from_records(records: Iterable[Mapping[str, Any]], run: str = "run") -> pd.DataFrame:
    records = list(records)
    frame = pd.DataFrame.from_records(records)
    frame["run"] = run
    frame["line"] = np.arange(len(frame))
    frame["call_key"] = [record_call_key(r) for r in records]
    return normalise_ledger(frame)


# Mem0's paper (arXiv 2504.19413, LoCoMo): p95 seconds of search and of search + answer.
MEM0_PUBLISHED = pd.DataFrame(
    [
        {"system": PAPER_MEMORY, "label": "Mem0", "stage": "search", "p95_s": 0.200},
        {"system": PAPER_MEMORY, "label": "Mem0", "stage": "total", "p95_s": 1.44},
        {"system": "memory_graph", "label": "Mem0^g", "stage": "search", "p95_s": 0.657},
        {"system": "memory_graph", "label": "Mem0^g", "stage": "total", "p95_s": 2.59},
        {"system": "long_context", "label": "full context", "stage": "total", "p95_s": 17.12},
    ]
)
LATENCY_COLUMNS = ("system", "stage", "n", "p50_s", "p95_s", "basis")
OFFLINE_BASIS = "offline (classical stand-ins and a local search, not a provider)"


def _embedding_latency(ledger: pd.DataFrame) -> pd.Series:
    if ledger.empty:
        return pd.Series(dtype="float64")
    embeds = ledger.loc[(ledger["stage"] == "embed") & ledger["question_id"].notna()]
    return embeds.groupby(["system", "question_id"])["latency_s"].sum()


def question_latencies(run_dirs: Sequence[RunPaths], ledger: pd.DataFrame) -> pd.DataFrame:
    """One row per answered question and system: ``search_s``, ``answer_s``, ``total_s``."""
    embedding = _embedding_latency(ledger)
    rows = []
    for run in run_dirs:
        for ds in run.datasets():
            for system in answer_systems(ds):
                frame = load_answers(ds, system)
                if frame.empty:
                    continue
                frame = frame.loc[frame["error"].isna() | (frame["error"] == "")]
                memory = system_kind(system) == "memory"
                search = pd.to_numeric(frame.get("search_latency_s"), errors="coerce")
                if memory:
                    keys = list(zip([system] * len(frame), frame["question_id"], strict=True))
                    embed = np.array([float(embedding.get(k, 0.0)) for k in keys])
                    search = search.fillna(0.0).to_numpy() + embed
                answer = pd.to_numeric(frame["latency_s"], errors="coerce").to_numpy()
                rows.append(
                    pd.DataFrame(
                        {
                            "dataset": ds.name,
                            "system": system,
                            "question_id": frame["question_id"],
                            "backend": frame["backend"],
                            "search_s": search if memory else np.nan,
                            "answer_s": answer,
                            "total_s": (search + answer) if memory else answer,
                        }
                    )
                )
    return (
        pd.concat(rows, ignore_index=True)
        if rows
        else pd.DataFrame(
            columns=[
                "dataset",
                "system",
                "question_id",
                "backend",
                "search_s",
                "answer_s",
                "total_s",
            ]
        )
    )


def latency_table(questions: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for system, group in questions.groupby("system", sort=False):
        basis = OFFLINE_BASIS if (group["backend"] == "offline").all() else "measured"
        for stage in ("search", "answer", "total"):
            values = group[f"{stage}_s"].dropna()
            if values.empty:
                continue
            rows.append(
                {
                    "system": system,
                    "stage": stage,
                    "n": len(values),
                    "p50_s": float(values.quantile(0.5)),
                    "p95_s": float(values.quantile(0.95)),
                    "basis": basis,
                }
            )
    return pd.DataFrame(rows, columns=list(LATENCY_COLUMNS))


def with_published(table: pd.DataFrame) -> pd.DataFrame:
    """The run's p95 beside Mem0's paper's, where it reports one."""
    mine = table.assign(kind=[system_kind(s) for s in table["system"]])
    published = MEM0_PUBLISHED.rename(columns={"p95_s": "published_p95_s"})
    exact = mine.merge(
        published[published["system"] != "long_context"], on=["system", "stage"], how="left"
    )
    lc = published[published["system"] == "long_context"].drop(columns="system")
    lc_rows = mine.loc[mine["kind"] == "long_context"].merge(lc, on="stage", how="left")
    out = pd.concat([exact.loc[exact["kind"] != "long_context"], lc_rows], ignore_index=True)
    return out.drop(columns="kind")
