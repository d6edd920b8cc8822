"""What a run will cost and how long it will take, before any paid call is made.

After notebook 00 has counted every history and question (free), this module multiplies those
counts by the dated price table under the stated assumptions below, per dataset and stage. The
runner prints it, writes it to the run's ``estimate_before_run`` table and refuses to start the
paid notebooks when the total exceeds ``max_cost_usd``. It is deliberately simple and every
constant is named: for a finer figure, run the ``estimate_<dataset>`` preset (the whole pipeline
offline on the real data, every prompt counted, priced as the paper's models).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import pandas as pd

from memcost.costs.model import PAPER_CONSTANTS
from memcost.data import read_questions
from memcost.execution import discount_multiplier
from memcost.models import EMBEDDING_MODEL, EXTRACTION_MODEL, JUDGE_MODEL, READER_MODEL
from memcost.params import client_option, normalise_execution, notebook_defaults
from memcost.paths import NOTEBOOKS_DIR, DatasetPaths
from memcost.prices import price_for

# --- Assumptions (each from the paper where it gives one) ---------------------------------------
# Writing memory with GPT-5-nano costs what the paper's LongMemEval bill implies per history token
# (§4.2: $21.76 + $0.037 for 500 histories of ~101.6k tokens; Tables 4-5 calibrate 4.296e-7).
INGEST_USD_PER_TOKEN_NANO = PAPER_CONSTANTS.write_usd_per_token
# Reading with GPT-5-mini: the paper's ~$0.001317 per question (Tables 4-5; text: ~$0.0013).
READ_USD_PER_QUESTION_MINI = PAPER_CONSTANTS.read_usd
# Output (visible + reasoning) tokens per long-context answer: what Tables 4-5 imply (~527).
LC_OUTPUT_TOKENS = PAPER_CONSTANTS.output_tokens
# A judge vote: question, gold answer, response and instructions in; a short verdict plus the
# reasoning of reasoning_effort=high out. The paper gives no figure; this is our assumption.
JUDGE_PROMPT_TOKENS = 700
JUDGE_OUTPUT_TOKENS = 1_000
# Baselines: the no-context prompt is the question and instructions; the oracle keeps about one
# session of the history (the evidence session).
NO_CONTEXT_PROMPT_TOKENS = 300
# Seconds per request, for the time estimate only (providers and load vary a lot).
SECONDS_PER_REQUEST = {"write": 12.0, "read": 6.0, "long_context": 20.0, "baseline": 6.0,
                       "judge": 15.0}
MESSAGES_PER_SEGMENT = 10  # §3.1 batch_size: one extraction call per 10 messages
# With the update phase each segment makes one extraction call and one update call (the
# segment's new facts against the similar stored ones); the write bill is split evenly between
# them, so that the two ledger stages can be given different execution modes.
UPDATE_SHARE_OF_WRITE = 0.5

STAGES = ("write", "read", "long_context", "baseline", "judge")


def _notebook_defaults(stem: str) -> dict[str, Any]:
    path = NOTEBOOKS_DIR / f"{stem}.ipynb"
    return notebook_defaults(path) if path.is_file() else {}


def effective_parameters(params: Mapping[str, Any]) -> dict[str, Any]:
    """The notebooks' defaults for 01-04, overridden by the preset's values for one dataset."""
    merged: dict[str, Any] = {}
    for stem in ("01_extract_facts", "02_answer_from_memory", "03_answer_long_context",
                 "04_judge_answers"):
        for key, value in _notebook_defaults(stem).items():
            merged.setdefault(key, value)
    merged.update(params)
    return merged


def _price_ratio(model: str, reference: str, overrides: Any = None) -> float:
    mine, ref = price_for(model, overrides), price_for(reference, overrides)
    return (mine.input + mine.output) / (ref.input + ref.output)


class _Rows:
    """The estimate's rows for one dataset, each priced from the price table unless given."""

    def __init__(self, dataset: str, params: Mapping[str, Any]):
        self.dataset, self.params = dataset, params
        self.rows: list[dict[str, Any]] = []

    def add(self, stage: str, system: str, model: str, requests: int, input_tokens: float,
            cached: float, output: float, usd: float | None = None, *,
            ledger_stage: str) -> None:
        """One row; ``ledger_stage`` (memcost.calls.STAGES) picks its execution mode, and
        ``usd_execution`` is its bill in that mode (NaN: the model has no price for it)."""
        overrides = self.params.get("price_overrides")
        price = price_for(model, overrides)
        if usd is None:
            usd = price.cost(prompt_tokens=int(input_tokens), cached_prompt_tokens=int(cached),
                             completion_tokens=int(output))
        mode = normalise_execution(client_option(self.params, "execution"))[ledger_stage]
        multiplier = discount_multiplier(model, mode, overrides)
        concurrency = max(1, int(client_option(self.params, "max_concurrency") or 1))
        self.rows.append({"dataset": self.dataset, "stage": stage, "system": system,
                          "model": model, "requests": int(requests),
                          "input_tokens": int(input_tokens), "cached_input_tokens": int(cached),
                          "output_tokens": int(output), "usd": float(usd),
                          "minutes": requests * SECONDS_PER_REQUEST[stage] / concurrency / 60,
                          "ledger_stage": ledger_stage, "execution": mode,
                          "usd_execution": math.nan if multiplier is None
                          else float(usd) * multiplier})


def _memory_rows(out: _Rows, stats: pd.DataFrame, n_questions: int) -> None:
    """Writing memory (per history token, §4.2's bill) and reading it (per question)."""
    p = out.params
    history = int(stats["text_tokens"].sum())
    segments = int(sum(math.ceil(n / MESSAGES_PER_SEGMENT) for n in stats["n_turns"]))
    extraction_model = str(p.get("extraction_model") or EXTRACTION_MODEL)
    write_usd = history * INGEST_USD_PER_TOKEN_NANO * _price_ratio(
        extraction_model, "gpt-5-nano", p.get("price_overrides"))
    update_share = UPDATE_SHARE_OF_WRITE if p.get("update_phase") else 0.0
    out.add("write", "memory", extraction_model, segments, history, 0, 0,
            usd=write_usd * (1 - update_share), ledger_stage="extract")
    if update_share:
        out.add("write", "memory", extraction_model, segments, 0, 0, 0,
                usd=write_usd * update_share, ledger_stage="update")
    reader = str(p.get("reader_model") or READER_MODEL)
    out.add("read", "memory", reader, n_questions, 0, 0, 0,
            usd=n_questions * READ_USD_PER_QUESTION_MINI * _price_ratio(reader, "gpt-5-mini",
                                                                     p.get("price_overrides")),
            ledger_stage="read")
    embedder = str(p.get("embedding_model") or EMBEDDING_MODEL)
    out.add("read", "memory", embedder, 0, n_questions * 20, 0, 0, ledger_stage="embed")


def _long_context_rows(out: _Rows, stats: pd.DataFrame, n_questions: int) -> None:
    """Each long-context model: the whole history per question, cached from the second on."""
    per_conversation = stats[["history_tokens", "n_questions", "n_sessions", "n_turns"]]
    for model in out.params.get("models") or []:
        first = later = 0.0
        for r in per_conversation.itertuples(index=False):
            if r.n_questions:
                first += r.history_tokens
                later += (r.n_questions - 1) * r.history_tokens
        cached_rate_known = (price_for(model, out.params.get("price_overrides")).cached_input
                             is not None)
        out.add("long_context", f"long_context_{model}", model, n_questions, first + later,
                later if cached_rate_known else 0, n_questions * LC_OUTPUT_TOKENS,
                ledger_stage="long_context")


def _baseline_rows(out: _Rows, stats: pd.DataFrame, n_questions: int) -> None:
    """Rolling window, no-context and oracle baselines, per baseline model."""
    p = out.params
    per_conversation = stats[["history_tokens", "n_questions", "n_sessions", "n_turns"]]
    window = int(p.get("window_turns") or 10)
    for model in p.get("baseline_models") or []:
        kinds = []
        if p.get("include_rolling_window", True):
            tokens = sum(r.history_tokens * min(1.0, window / max(1, r.n_turns)) * r.n_questions
                         for r in per_conversation.itertuples(index=False))
            kinds.append(("rolling_window", tokens))
        if p.get("include_no_context"):
            kinds.append(("no_context", NO_CONTEXT_PROMPT_TOKENS * n_questions))
        if p.get("include_oracle"):
            tokens = sum(r.history_tokens / max(1, r.n_sessions) * r.n_questions
                         for r in per_conversation.itertuples(index=False))
            kinds.append(("oracle", tokens))
        for kind, tokens in kinds:
            out.add("baseline", f"{kind}_{model}", model, n_questions, tokens, 0,
                    n_questions * LC_OUTPUT_TOKENS, ledger_stage="long_context")


def _judge_rows(out: _Rows, questions: pd.DataFrame) -> None:
    """Every answering system's answers judged ``n_votes`` times per judge prompt."""
    p = out.params
    judged = questions
    if out.dataset == "locomo" and not p.get("include_adversarial"):
        judged = questions.loc[questions["category_id"] != 5]
    if out.dataset == "personamem_v2" and p.get("mode") == "multiple_choice":
        return  # multiple choice is scored by letter, with no model call
    systems = 1 + len(p.get("models") or []) + sum(
        1 for r in out.rows if r["stage"] == "baseline")
    votes = int(p.get("n_votes") or 3) * len(p.get("judge_prompts") or ["judge"])
    requests = len(judged) * systems * votes
    judge = str(p.get("judge_model") or JUDGE_MODEL)
    out.add("judge", "judge", judge, requests, requests * JUDGE_PROMPT_TOKENS, 0,
            requests * JUDGE_OUTPUT_TOKENS, ledger_stage="judge")


def estimate_dataset(ds: DatasetPaths, params: Mapping[str, Any]) -> pd.DataFrame:
    """Rows ``dataset, stage, system, model, requests, input_tokens, cached_input_tokens,
    output_tokens, usd, minutes, ledger_stage, execution, usd_execution`` for one prepared
    dataset (notebook 00's files). ``usd`` is the all-interactive bill, ``usd_execution`` the
    bill with the ``execution`` parameter's modes."""
    stats = pd.read_parquet(ds.data / "conversation_stats.parquet")
    return estimate_counts(ds.name, stats, read_questions(ds), params)


def estimate_counts(
    dataset: str, stats: pd.DataFrame, questions: pd.DataFrame, params: Mapping[str, Any]
) -> pd.DataFrame:
    """:func:`estimate_dataset` from the counts themselves: ``stats`` in the shape of
    ``conversation_stats.parquet``, ``questions`` with ``conversation_id`` and ``category_id``."""
    out = _Rows(dataset, effective_parameters(params))
    _memory_rows(out, stats, len(questions))
    _long_context_rows(out, stats, len(questions))
    _baseline_rows(out, stats, len(questions))
    _judge_rows(out, questions)
    return pd.DataFrame(out.rows)


def estimate_run(prepared: Mapping[str, tuple[DatasetPaths, Mapping[str, Any]]]) -> pd.DataFrame:
    """The estimate for every dataset of a run: ``{name: (paths, preset parameters)}``."""
    frames = [estimate_dataset(ds, params) for ds, params in prepared.values()]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def chosen_total(estimate: pd.DataFrame) -> float | None:
    """The bill with the chosen execution modes (``None``: a row's model has no price in its
    mode, so the total is not known)."""
    if estimate.empty:
        return 0.0
    values = estimate["usd_execution"]
    return None if values.isna().any() else float(values.sum())


def _modes(estimate: pd.DataFrame) -> str:
    """``{extract: batch, judge: batch}``: the stages not run interactively."""
    chosen = estimate.loc[estimate["execution"] != "interactive", ["ledger_stage", "execution"]]
    pairs = dict(chosen.drop_duplicates().itertuples(index=False, name=None))
    return "{" + ", ".join(f"{k}: {v}" for k, v in pairs.items()) + "}"


def summary_text(estimate: pd.DataFrame, *, max_cost_usd: float | None) -> str:
    """A few lines for the terminal: per dataset and stage, then the total against the budget;
    with batch or flex stages, each line and the total also in the chosen modes."""
    if estimate.empty:
        return "nothing to estimate"
    discounted = bool((estimate["execution"] != "interactive").any())
    frame = estimate.assign(unpriced=estimate["usd_execution"].isna())
    pivot = frame.groupby(["dataset", "stage"], sort=False)[
        ["requests", "usd", "usd_execution", "minutes", "unpriced"]].sum(min_count=1)
    lines = ["estimated bill of this run (list prices; assumptions in memcost/costs/estimate.py):"]
    if discounted:
        lines[0] += f"\n  {'':<28} {'':>17}  {'interactive':>10}  {'as chosen':>10}"
    for (dataset, stage), r in pivot.iterrows():
        chosen = ""
        if discounted:
            chosen = "  " + ("       n/a" if r.unpriced else f"${r.usd_execution:>9,.2f}")
        lines.append(f"  {dataset:<14} {stage:<13} {int(r.requests):>8,} requests  "
                     f"${r.usd:>9,.2f}{chosen}  ~{r.minutes:,.0f} min")
    total, minutes = float(estimate["usd"].sum()), float(estimate["minutes"].sum())
    budget = "" if max_cost_usd is None else f" (max_cost_usd = ${max_cost_usd:,.2f})"
    if not discounted:
        lines.append(f"  total: ${total:,.2f}, about {minutes / 60:,.1f} hours of calls{budget}")
        return "\n".join(lines)
    chosen = chosen_total(estimate)
    lines.append(f"  total, all interactive: ${total:,.2f}, about {minutes / 60:,.1f} hours of "
                 f"calls{budget}")
    if chosen is not None:
        lines.append(f"  total, with execution {_modes(estimate)}: ${chosen:,.2f} (batch results "
                     "arrive within 24 hours; Flex answers are slower)")
        return "\n".join(lines)
    lines.append(f"  total, with execution {_modes(estimate)}: not known")
    for r in estimate.loc[estimate["usd_execution"].isna()].itertuples():
        lines.append(f"    {r.dataset} {r.ledger_stage}: {r.model} has no {r.execution} price "
                     f"in memcost.prices; the estimate does not guess one")
    return "\n".join(lines)
