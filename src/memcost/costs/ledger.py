"""The usage ledgers (``calls.sqlite``) of one or more runs, loaded and priced: section 2's start.

Every model call leaves one ledger record with its token counts (schema: :mod:`memcost.calls`,
read through :func:`memcost.calls.read_calls`; analysis never imports the client). This module
prices each record with :mod:`memcost.catalog` and labels it with its side of the cost model
(write, read, long context, judge); :mod:`memcost.costs.measured` cuts the result the way the
paper reports it (§4.2).

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

from memcost.calls import BASE_FIELDS, OFFLINE, STANDARD_TAGS, read_calls, record_call_key
from memcost.catalog import price_for, price_successor, slug
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


def as_successors(ledger: pd.DataFrame) -> pd.DataFrame:
    """The ledger with each retired model replaced by its successor
    (:func:`memcost.catalog.price_successor`): the same tokens, billed as today's models would
    bill them (a model's tokens would differ; the token counts are the run's)."""
    return ledger.assign(model=ledger["model"].map(price_successor))


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
    # The long-context tier (today's rows): above the threshold the whole record costs more.
    # Uncached prompt tokens are priced as plain input: the ledger holds no cache-write count.
    tiers = [
        prices[m].tier_multipliers(p)
        for m, p in zip(priced["model"], priced["prompt_tokens"], strict=True)
    ]
    tier_in = pd.Series([t[0] for t in tiers], index=priced.index, dtype=float)
    tier_out = pd.Series([t[1] for t in tiers], index=priced.index, dtype=float)
    rate_in = priced["model"].map(lambda m: prices[m].input).astype(float) * tier_in
    rate_cached = priced["model"].map(lambda m: prices[m].cached_rate).astype(float) * tier_in
    rate_out = priced["model"].map(lambda m: prices[m].output).astype(float) * tier_out
    cached_tokens = priced[["cached_prompt_tokens", "prompt_tokens"]].min(axis=1)
    priced["price_model"] = priced["model"].map(lambda m: prices[m].model).astype("string")
    priced["price_date"] = priced["model"].map(lambda m: prices[m].date).astype("string")
    priced["input_usd"] = (priced["prompt_tokens"] - cached_tokens) * rate_in / 1e6
    priced["cached_input_usd"] = cached_tokens * rate_cached / 1e6
    priced["output_usd"] = priced["completion_tokens"] * rate_out / 1e6
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
    return [None if pd.isna(v) else v for v in series]


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
