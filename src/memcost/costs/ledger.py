"""The run's store of calls (``calls.sqlite``) loaded and priced, and the latency per system.

Every model call of a run, or of several runs, with its tokens, its dollars at list price, what
was paid, and its stage and system: section 2 of notebook 05 starts here. The latency tables
say how long a question takes to search and to answer, per system and stage.
"""

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
    """The ledgers of the given runs, concatenated, with ``run`` and ``line`` columns added.

    A run without ``calls.sqlite`` contributes nothing (the caller reports which runs had none,
    see :func:`ledger_paths`). Missing fields become nulls / zeros, never errors: the ledger may
    come from an older client version.
    """
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
    """``{calls.sqlite path: exists}`` for each run, for the notebook's notes."""
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


def as_successors(ledger: pd.DataFrame) -> pd.DataFrame:
    """The ledger with each retired model replaced by its successor
    (:func:`memcost.catalog.price_successor`): the same tokens, billed as today's models would
    bill them (a model's tokens would differ; the token counts are the run's)."""
    successors = {model: price_successor(model) for model in ledger["model"].unique()}
    return ledger.assign(model=ledger["model"].map(successors))


def answer_system(
    stage: str | None, system: str | None, model: str | None, phase: str
) -> str | None:
    """The system whose answers a call produced (``memory_mem0_style``, ``long_context_<slug>``,
    …)."""
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
    """Add what each record costs at the price table's prices (``on``: the rows in force that
    day, ``YYYY-MM-DD``; default the paper's table).

    Columns added: ``price_model``, ``price_date`` (the dated price row used), ``input_usd``,
    ``cached_input_usd``, ``output_usd``,
    ``cost_usd`` (the record's tokens at list price, times the batch or Flex multiplier of a
    record sent that way: its ``execution``), ``spent_usd`` (what was paid: the provider's
    ``billed_usd`` where it reported one, else ``cost_usd``; zero for local cache hits,
    offline calls and calls that failed before anything was billed),
    ``workload`` (false for replays of a request already recorded earlier in the same run),
    ``phase``, ``answer_system``, ``is_estimate``. A model without a price raises
    :class:`memcost.catalog.UnknownPriceError` naming the model and the table.
    """
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
    """An empty ledger, with the price columns typed as a priced one's."""
    for column in ("input_usd", "cached_input_usd", "output_usd", "cost_usd", "spent_usd"):
        priced[column] = pd.Series(dtype="float64")
    for column in ("workload", "is_estimate"):
        priced[column] = pd.Series(dtype=bool)
    for column in ("price_model", "price_date", "phase", "answer_system"):
        priced[column] = pd.Series(dtype="string")
    return priced


def _add_list_prices(priced: pd.DataFrame, prices: Mapping[str, Any]) -> None:
    """Add the price row used and each record's tokens at list price, in place."""
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
    """What this run paid for each record.

    The rule of the client's budget (memcost.calls.is_paid): a cache hit, an offline call or a
    call that failed before anything was billed costs nothing; a failed reply that was billed
    (cut off, filtered) costs its tokens. Where the provider reported its charge
    (``billed_usd``, OpenRouter's usage.cost), that is what was paid.
    """
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
    """Add ``phase`` (write, read, long_context, judge) and ``answer_system`` to each record."""
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
    """Plain Python values with ``None`` for missing ones (pandas' NA is not a boolean)."""
    return series.astype(object).where(series.notna(), None).tolist()


def _replays(priced: pd.DataFrame) -> pd.Series:
    """Cache hits of a call that already has a record earlier in the same run.

    A call is what the ledger's checkpoint counts once: the request hash with the record's tags
    (:func:`memcost.calls.record_call_key`). By the request hash alone, a request that two
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


def ledger_from_records(records: Iterable[Mapping[str, Any]], run: str = "run") -> pd.DataFrame:
    """A normalised ledger from in-memory records (for examples and tests)."""
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
    """Seconds of each question's embedding call, by (system, question_id)."""
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
    """``system, stage, n, p50_s, p95_s, basis`` (stage: search, answer, total)."""
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
    """The run's p95 next to Mem0's paper's, for the systems and stages it reports."""
    mine = table.assign(kind=[system_kind(s) for s in table["system"]])
    published = MEM0_PUBLISHED.rename(columns={"p95_s": "published_p95_s"})
    exact = mine.merge(
        published[published["system"] != "long_context"], on=["system", "stage"], how="left"
    )
    lc = published[published["system"] == "long_context"].drop(columns="system")
    lc_rows = mine.loc[mine["kind"] == "long_context"].merge(lc, on="stage", how="left")
    out = pd.concat([exact.loc[exact["kind"] != "long_context"], lc_rows], ignore_index=True)
    return out.drop(columns="kind")
