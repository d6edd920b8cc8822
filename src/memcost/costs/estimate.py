"""The bill before any paid call: every stage's planned requests and tokens, priced at list prices
in the chosen execution modes and timed at the account's rate limits."""

from __future__ import annotations

import functools
import math
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from memcost.answers import system_label
from memcost.calls import OFFLINE
from memcost.catalog import (
    TIER_SOURCE,
    cacheable,
    discount_multiplier,
    dollars,
    is_known,
    model_info,
    per_model,
    price_for,
    tier_limits,
)
from memcost.costs.model import PAPER_CONSTANTS
from memcost.data import load
from memcost.data.benchmark import read_conversations, read_questions
from memcost.data.prepare import conversation_stats, select
from memcost.data.sources import resolve_source
from memcost.longctx.history import generation_settings, oracle_asks
from memcost.paper import (
    EMBEDDING_MODEL,
    EXTRACTION_MODEL,
    JUDGE_MODEL,
    MEASURED,
    PAPER_SETTINGS,
    READER_MODEL,
    TABLE1,
    TABLE2,
)
from memcost.params import (
    backend_of,
    client_option,
    normalise_execution,
    normalise_price_overrides,
    notebook_defaults,
)
from memcost.paths import NOTEBOOKS_DIR, WITH_OPTIONS, DatasetPaths

# --- Assumptions (each from the paper where it gives one) ---------------------------------------
# Writing memory with GPT-5-nano costs what the paper's LongMemEval bill implies (§4.2: $21.76 +
# $0.037 for 500 histories of ~101.6k tokens; Tables 4-5 calibrate 4.296e-7 per history token),
# in two parts, as §4.2 splits its tokens: the prompts' share (122.6M tokens at the input price)
# per history token, and the completions' share (41.6M tokens at the output price: facts and
# reasoning, which come per call whatever a segment holds) per segment of 10 messages, of which
# LongMemEval has 0.8533 per 1,000 tokens (MEASURED_SHAPES). LongMemEval's bill is unchanged;
# LoCoMo's short segments (4.378 per 1,000 tokens) cost some four times more per history token.
INGEST_USD_PER_TOKEN_NANO = PAPER_CONSTANTS.write_usd_per_token
_NANO = price_for("gpt-5-nano")  # at the paper's prices
_PROMPT_USD = MEASURED["extraction_prompt_tokens"] * _NANO.input / 1e6
_COMPLETION_USD = MEASURED["extraction_completion_tokens"] * _NANO.output / 1e6
PROMPT_SHARE_OF_WRITE = _PROMPT_USD / (_PROMPT_USD + _COMPLETION_USD)
# Reading with GPT-5-mini: the paper's ~$0.001317 per question (Tables 4-5; text: ~$0.0013).
READ_USD_PER_QUESTION_MINI = PAPER_CONSTANTS.read_usd
# ... with 1,046 retrieved tokens a question (§4.2): a system that shows its reader more or less
# (MemorySystem.read_context_tokens) pays the difference at the reader's input price, and what
# every question of a user sees first (read_shared_tokens) at its cached price after the first
PAPER_RETRIEVED_TOKENS = MEASURED["read_retrieved_tokens_per_question"]
# Output (visible + reasoning) tokens per long-context answer: what Tables 4-5 imply (~527).
LC_OUTPUT_TOKENS = PAPER_CONSTANTS.output_tokens
# A judge vote: question, gold answer, response and instructions in; a short verdict plus the
# reasoning of reasoning_effort=high out. The paper gives no figure; this is our assumption.
JUDGE_PROMPT_TOKENS = 700
JUDGE_OUTPUT_TOKENS = 1_000
# Baselines: the no-context prompt is the question and instructions; the oracle keeps about one
# session of the history (the evidence session).
NO_CONTEXT_PROMPT_TOKENS = 300
# Seconds per request, for the time estimate only (providers and load vary a lot): with
# max_concurrency requests in flight, a stage takes at least requests x this / max_concurrency,
# and at least what its model's rate limits allow (memcost.catalog).
SECONDS_PER_REQUEST = {
    "write": 12.0,
    "read": 6.0,
    "long_context": 20.0,
    "baseline": 6.0,
    "judge": 15.0,
}
SECONDS_PER_EMBEDDING = 0.5  # an embedding request, of either stage
MESSAGES_PER_SEGMENT = 10  # §3.1 batch_size: one extraction call per 10 messages
SEGMENT_CHARS = PAPER_SETTINGS["01_extract_facts"]["max_segment_chars"]  # §3.1
# With the update phase each segment makes one extraction call and one update call (the
# segment's new facts against the similar stored ones); the write bill is split evenly between
# them, so that the two ledger stages can be given different execution modes.
UPDATE_SHARE_OF_WRITE = 0.5
# The other memory systems (memory_systems): each writes as many passes over the history as it
# declares (MemorySystem.write_passes: graph two, rag none) at that cost per pass, with the
# update phase only if it has one, and reads through the paper's reader at its cost.

STAGES = ("write", "read", "long_context", "baseline", "judge")
PAPER_PRICED = ("extract", "update", "read")  # memory calls priced per history token / question
# The notebook that makes each stage's calls: a run of some steps is estimated for those.
STEP_STAGES = {
    "01": ("write",),
    "02": ("read",),
    "03": ("long_context", "baseline"),
    "04": ("judge",),
}


def _notebook_defaults(stem: str) -> dict[str, Any]:
    path = NOTEBOOKS_DIR / f"{stem}.ipynb"
    return notebook_defaults(path) if path.is_file() else {}


def effective_parameters(params: Mapping[str, Any]) -> dict[str, Any]:
    merged: dict[str, Any] = {}
    for stem in (
        "01_extract_facts",
        "02_answer_from_memory",
        "03_answer_long_context",
        "04_judge_answers",
    ):
        for key, value in _notebook_defaults(stem).items():
            merged.setdefault(key, value)
    merged.update(params)
    return merged


def write_unit_usd(history_tokens: float, segments: float, price: Any) -> float:
    """The paper's memory writing ``history_tokens`` in ``segments`` with a model of ``price``: the
    paper's prompt cost per history token and completion cost per segment (§4.2), at that model's
    prices."""
    per_token = INGEST_USD_PER_TOKEN_NANO * PROMPT_SHARE_OF_WRITE * price.input / _NANO.input
    tokens_per_segment = 1000 / MEASURED_SHAPES["longmemeval"].segments_per_1k
    per_segment = (
        INGEST_USD_PER_TOKEN_NANO
        * (1 - PROMPT_SHARE_OF_WRITE)
        * tokens_per_segment
        * price.output
        / _NANO.output
    )
    return history_tokens * per_token + segments * per_segment


def _price_ratio(model: str, reference: str, overrides: Any = None) -> float:
    mine, ref = price_for(model, overrides), price_for(reference, overrides)
    return (mine.input + mine.output) / (ref.input + ref.output)


class _Rows:
    def __init__(self, dataset: str, params: Mapping[str, Any]):
        # a bare number (``{model: 0}``) is every price of the model, cached input included
        overrides = normalise_price_overrides(params.get("price_overrides"))
        self.dataset, self.params = dataset, {**params, "price_overrides": overrides}
        self.rows: list[dict[str, Any]] = []

    def add(
        self,
        stage: str,
        system: str,
        model: str,
        requests: int,
        input_tokens: float,
        cached: float,
        output: float,
        usd: float | None = None,
        *,
        ledger_stage: str,
        effort: str = "",
        per_prefix: int = 0,
        concurrency: int | None = None,
    ) -> None:
        """One row; ``ledger_stage`` picks its execution mode (``usd_execution``: its bill there,
        NaN: no price), ``minutes`` its time at the rate limits (NaN: a batch); ``per_prefix``:
        the most requests sharing one cached prefix; ``concurrency``: the most in flight where
        not ``max_concurrency``."""
        overrides = self.params.get("price_overrides")
        price = price_for(model, overrides)
        if usd is None:  # priced per (mean) request: a long-context tier applies per request
            n = max(1, int(requests))
            usd = n * price.cost(
                prompt_tokens=input_tokens / n,
                cached_prompt_tokens=cached / n,
                completion_tokens=output / n,
            )
        mode = normalise_execution(client_option(self.params, "execution"))[ledger_stage]
        multiplier = discount_multiplier(model, mode, overrides)
        seconds = SECONDS_PER_EMBEDDING if ledger_stage == "embed" else SECONDS_PER_REQUEST[stage]
        minutes, bound, limits = self._minutes(
            seconds, model, requests, input_tokens + output, per_prefix, concurrency
        )
        self.rows.append(
            {
                "dataset": self.dataset,
                "stage": stage,
                "system": system,
                "model": model,
                "effort": effort,
                "requests": int(requests),
                "input_tokens": int(input_tokens),
                "cached_input_tokens": int(cached),
                "output_tokens": int(output),
                "usd": float(usd),
                "minutes": math.nan if mode == "batch" else minutes,
                "bound_by": "batch (within 24 h)" if mode == "batch" else bound,
                "rate_limits": limits,
                "ledger_stage": ledger_stage,
                "execution": mode,
                "usd_execution": math.nan if multiplier is None else float(usd) * multiplier,
            }
        )

    def _minutes(
        self,
        seconds: float,
        model: str,
        requests: float,
        tokens: float,
        per_prefix: int = 0,
        concurrency: int | None = None,
    ) -> tuple[float, str, str]:
        """Minutes of calls of ``seconds`` each, what binds them (requests, tokens, latency over
        ``max_concurrency``, one prefix's pace on OpenAI), and where the limits came from."""
        most = int(client_option(self.params, "max_concurrency") or 1)
        concurrency = max(1, min(most, concurrency or most))
        stated = client_option(self.params, "rate_limits")
        backend = backend_of(model, self.params)
        if backend in ("openai", OFFLINE) or per_model(stated, model) is not None:
            rpm, tpm, source = tier_limits(model, stated)
        else:  # OpenAI's tiers bind its own API: another provider's or your server's are unknown
            rpm, tpm, source = None, None, f"none known on backend {backend}"
        bounds = {"latency": requests * seconds / concurrency / 60}
        if rpm:
            bounds["requests/min"] = requests / rpm
        if tpm:
            bounds["tokens/min"] = tokens / tpm
        if per_prefix > 1 and self._paced_by_prefix(model):
            pace = int(client_option(self.params, "prefix_requests_per_minute"))
            bounds["requests/min a prefix"] = (per_prefix - 1) / pace
        bound = max(bounds, key=bounds.__getitem__)
        return bounds[bound], bound, source

    def _paced_by_prefix(self, model: str) -> bool:
        """The client paces a prefix's requests to OpenAI's API alone (offline is timed as
        there)."""
        if backend_of(model, self.params) not in ("openai", OFFLINE):
            return False
        return is_known(model) and "openai" in model_info(model).providers


def _effort(params: Mapping[str, Any], key: str) -> str:
    return str(params.get(key) or "")


def extraction_segments(
    stats: pd.DataFrame,
    batch_size: int,
    *,
    conversations: pd.DataFrame | None = None,
    max_chars: int | None = None,
) -> int:
    """Extraction calls: with ``conversations``, the segments notebook 01's own cutter makes (paper
    §3.1); without (paper-scale counts), their ``n_segments``, or ``batch_size`` messages a call
    and one a session at least."""
    if conversations is None:
        paper_cut = batch_size == MESSAGES_PER_SEGMENT and max_chars in (None, SEGMENT_CHARS)
        if "n_segments" in stats and paper_cut:
            return int(stats["n_segments"].sum())
        return int(
            sum(
                max(math.ceil(turns / batch_size), sessions)
                for turns, sessions in zip(stats["n_turns"], stats["n_sessions"], strict=True)
            )
        )
    from memcost.memory.segments import segment_conversation  # notebook 01's cutter

    limit = max_chars or SEGMENT_CHARS
    return sum(
        len(segment_conversation(turns, batch_size=batch_size, max_chars=limit)[0])
        for _, turns in conversations.groupby("conversation_id", sort=False)
    )


def _memory_rows(
    out: _Rows, stats: pd.DataFrame, n_questions: int, conversations: pd.DataFrame | None
) -> None:
    """Writing each memory system (the paper's measured write cost, paper §4.2, times its model
    passes) and reading it (the reader and the question's embedding per question)."""
    from memcost.memory import parse_systems, system_class  # the registry: only when asked

    p = out.params
    history = int(stats["text_tokens"].sum())
    counted: dict[tuple, int] = {}  # segments by (batch_size, max_segment_chars)
    reader = str(p.get("reader_model") or READER_MODEL)
    read_usd = READ_USD_PER_QUESTION_MINI * _price_ratio(
        reader, "gpt-5-mini", p.get("price_overrides")
    )
    for name, given in parse_systems(p.get("memory_systems") or ["mem0_style"]):
        cls = system_class(name)
        chosen = cls.settings_from(given, p)  # the settings the system is built with
        cut = (
            int(chosen.get("batch_size") or p.get("batch_size") or MESSAGES_PER_SEGMENT),
            int(chosen.get("max_segment_chars") or 0) or None,
        )
        if cut not in counted:
            counted[cut] = extraction_segments(
                stats, cut[0], conversations=conversations, max_chars=cut[1]
            )
        segments = counted[cut]
        model = str(chosen.get(cls.write_model_setting) or EXTRACTION_MODEL)
        effort = str(
            chosen.get(cls.write_model_setting.replace("_model", "_reasoning_effort")) or ""
        )
        price = price_for(model, p.get("price_overrides"))
        updates = cls.write_update_phase and chosen.get("update_phase", True)
        share = UPDATE_SHARE_OF_WRITE if updates else 0.0
        system = cls.answers_as
        calls, read = cls.write_calls(chosen, stats, segments)
        # a stage whose calls a user makes in turn has at most one in flight per user built at once
        at_once = {s: cls.users_at_once or len(stats) for s in cls.in_turn(chosen)}
        if cls.write_passes:
            # the paper's measured unit is one extraction pass and its update phase; its
            # completions come per segment, or per call where a system makes fewer, longer
            # calls (observational memory's observer reads 30,000 tokens at a time)
            unit = write_unit_usd(history * read, min(segments * read, calls), price)
            usd = unit * cls.write_passes * (1 - UPDATE_SHARE_OF_WRITE)
            tokens = history * read * cls.write_passes
            out.add(
                "write",
                system,
                model,
                calls,
                tokens,
                0,
                0,
                usd=usd,
                ledger_stage="extract",
                effort=effort,
                concurrency=at_once.get("extract"),
            )
        if share:
            usd = write_unit_usd(history, segments, price) * share
            out.add(
                "write",
                system,
                model,
                segments,
                0,
                0,
                0,
                usd=usd,
                ledger_stage="update",
                effort=effort,
                concurrency=at_once.get("update"),
            )
        embedder = str(chosen.get("embedding_model") or EMBEDDING_MODEL)
        if not cls.write_passes:  # its items are the history itself, embedded
            out.add("write", system, embedder, calls, history, 0, 0, ledger_stage="embed")
        effort = _effort(p, "reader_reasoning_effort")
        shown, cached, sharing = _read_tokens(cls, chosen, stats) or (None, 0.0, 0)
        usd = n_questions * read_usd
        if shown is not None:  # the paper's read, plus what this system shows more (or less)
            price = price_for(reader, p.get("price_overrides"))
            extra = shown - n_questions * PAPER_RETRIEVED_TOKENS
            usd += extra * price.input / 1e6
            usd -= cached * (price.input - price.cached_rate) / 1e6
        out.add(
            "read",
            system,
            reader,
            n_questions,
            shown or 0,
            cached,
            0,
            usd=usd,
            ledger_stage="read",
            effort=effort,
            per_prefix=sharing,
        )
        # each question embedded in a request of its own
        out.add("read", system, embedder, n_questions, n_questions * 20, 0, 0, ledger_stage="embed")


def _read_tokens(
    cls: Any, settings: Mapping[str, Any], stats: pd.DataFrame
) -> tuple[float, float, int] | None:
    """The memory a system's reader sees over all questions, the part a prompt cache serves (what
    each question of a user sees first, from the second on) and the most questions sharing such a
    prefix; ``None``: not known before the run."""
    total = cached = 0.0
    sharing = 0
    for r in stats.itertuples():
        sizes = (settings, float(r.history_tokens), float(r.history_tokens) / max(1, r.n_turns))
        per_question = cls.read_context_tokens(*sizes)
        if per_question is None:
            return None
        total += per_question * r.n_questions
        shared = cacheable(int(cls.read_shared_tokens(*sizes)))
        cached += shared * max(0, int(r.n_questions) - 1)
        sharing = max(sharing, int(r.n_questions) if shared else 0)
    return total, cached, sharing


def _long_context_rows(out: _Rows, stats: pd.DataFrame, n_questions: int) -> None:
    per_conversation = stats[["history_tokens", "n_questions", "n_sessions", "n_turns"]]
    for model in out.params.get("models") or []:
        first = later = 0.0
        for r in per_conversation.itertuples(index=False):
            if r.n_questions:
                first += r.history_tokens
                later += (r.n_questions - 1) * r.history_tokens
        cached_rate_known = (
            price_for(model, out.params.get("price_overrides")).cached_input is not None
        )
        effort = _answer_effort(out.params, model)
        out.add(
            "long_context",
            f"long_context_{model}",
            model,
            n_questions,
            first + later,
            later if cached_rate_known else 0,
            n_questions * LC_OUTPUT_TOKENS,
            ledger_stage="long_context",
            effort=effort,
            per_prefix=int(stats["n_questions"].max()) if len(stats) else 0,
        )


def _answer_effort(params: Mapping[str, Any], model: str) -> str:
    """The reasoning effort notebook 03 answers with (paper §3.2, or the ``generation``
    parameter's)."""
    settings = generation_settings(
        model, params.get("generation") or {}, client_option(params, "model_capabilities") or None
    )
    return str(settings.get("reasoning_effort") or "")


def _oracle_asks(questions: pd.DataFrame, conversations: pd.DataFrame | None) -> pd.Series:
    if conversations is None or "evidence" not in questions:
        return pd.Series(True, index=questions.index)
    return oracle_asks(conversations, questions)


def _baseline_rows(
    out: _Rows, stats: pd.DataFrame, questions: pd.DataFrame, asked: pd.Series
) -> None:
    p = out.params
    n_questions = len(questions)
    asks = questions.loc[asked, "conversation_id"].value_counts()
    per_conversation = stats[["history_tokens", "n_questions", "n_sessions", "n_turns"]]
    window = int(p.get("window_turns") or 10)
    for model in p.get("baseline_models") or []:
        kinds = []
        if p.get("include_rolling_window", True):
            tokens = sum(
                r.history_tokens * min(1.0, window / max(1, r.n_turns)) * r.n_questions
                for r in per_conversation.itertuples(index=False)
            )
            kinds.append(("rolling_window", tokens))
        if p.get("include_no_context"):
            kinds.append(("no_context", NO_CONTEXT_PROMPT_TOKENS * n_questions))
        if p.get("include_oracle"):
            tokens = sum(
                r.history_tokens / max(1, r.n_sessions) * asks.get(r.conversation_id, 0)
                for r in stats.itertuples(index=False)
            )
            kinds.append(("oracle", tokens))
        for kind, tokens in kinds:
            n = int(asks.sum()) if kind == "oracle" else n_questions
            out.add(
                "baseline",
                f"{kind}_{model}",
                model,
                n,
                tokens,
                0,
                n * LC_OUTPUT_TOKENS,
                ledger_stage="long_context",
                effort=_answer_effort(p, model),
            )


def _judge_rows(out: _Rows, questions: pd.DataFrame, asked: pd.Series) -> None:
    p = out.params
    judged = questions
    if out.dataset == "locomo" and not p.get("include_adversarial"):
        judged = questions.loc[questions["category_id"] != 5]
    if out.dataset in WITH_OPTIONS and p.get("mode") == "multiple_choice":
        return  # multiple choice is scored by letter, with no model call
    systems = (
        len(p.get("memory_systems") or ["mem0_style"])
        + len(p.get("models") or [])
        + sum(1 for r in out.rows if r["stage"] == "baseline")
    )
    oracles = sum(1 for r in out.rows if r["system"].startswith("oracle_"))
    answered = len(judged) * systems - oracles * int((~asked[judged.index]).sum())
    votes = int(p.get("n_votes") or 3) * len(p.get("judge_prompts") or ["judge"])
    requests = answered * votes
    judge = str(p.get("judge_model") or JUDGE_MODEL)
    out.add(
        "judge",
        "judge",
        judge,
        requests,
        requests * JUDGE_PROMPT_TOKENS,
        0,
        requests * JUDGE_OUTPUT_TOKENS,
        ledger_stage="judge",
        effort=_effort(p, "reasoning_effort"),
    )


def estimate_dataset(
    ds: DatasetPaths, params: Mapping[str, Any], *, steps: Collection[str] | None = None
) -> pd.DataFrame:
    """The estimate of one prepared dataset: a row per stage, system and model (``usd``: all
    interactive; ``usd_execution``: in the ``execution`` parameter's modes)."""
    stats = pd.read_parquet(ds.data / "conversation_stats.parquet")
    return estimate_counts(
        ds.name,
        stats,
        read_questions(ds),
        params,
        steps=steps,
        conversations=read_conversations(ds),
    )


def estimate_counts(
    dataset: str,
    stats: pd.DataFrame,
    questions: pd.DataFrame,
    params: Mapping[str, Any],
    *,
    steps: Collection[str] | None = None,
    conversations: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """:func:`estimate_dataset` from counts: ``stats`` shaped as ``conversation_stats.parquet``,
    ``questions`` with ``conversation_id`` and ``category_id``; ``steps``: only those notebooks'
    stages; ``conversations``: a real file's turns (``None`` at the paper's scale)."""
    out = _Rows(dataset, effective_parameters(params))
    _memory_rows(out, stats, len(questions), conversations)
    _long_context_rows(out, stats, len(questions))
    asked = _oracle_asks(questions, conversations)
    _baseline_rows(out, stats, questions, asked)
    _judge_rows(out, questions, asked)
    if steps is not None:  # only what the notebooks that run will call
        wanted = {
            stage for step, stages in STEP_STAGES.items() if step in steps for stage in stages
        }
        out.rows = [r for r in out.rows if r["stage"] in wanted]
    return pd.DataFrame(out.rows)


def estimate_run(
    prepared: Mapping[str, tuple[DatasetPaths, Mapping[str, Any]]],
    *,
    steps: Collection[str] | None = None,
) -> pd.DataFrame:
    frames = [estimate_dataset(ds, params, steps=steps) for ds, params in prepared.values()]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def chosen_total(estimate: pd.DataFrame) -> float | None:
    """The bill in the chosen execution modes (``None``: a model has no price in its mode)."""
    if estimate.empty:
        return 0.0
    values = estimate["usd_execution"]
    return None if values.isna().any() else float(values.sum())


def _modes(estimate: pd.DataFrame) -> str:
    chosen = estimate.loc[estimate["execution"] != "interactive", ["ledger_stage", "execution"]]
    pairs = dict(chosen.drop_duplicates().itertuples(index=False, name=None))
    return "{" + ", ".join(f"{k}: {v}" for k, v in pairs.items()) + "}"


def _tokens(n: float) -> str:
    return f"{n / 1e6:,.1f}M" if n >= 1e6 else f"{n / 1e3:,.0f}k" if n >= 1e3 else f"{n:,.0f}"


def _time(row: Any) -> str:
    if row.execution == "batch":
        return "within 24 h (batch)"
    hours = row.minutes / 60
    when = f"{hours:,.1f} h" if hours >= 1 else f"{row.minutes:,.0f} min"
    return f"{when} ({row.bound_by})"


def call_hours(estimate: pd.DataFrame) -> float:
    """Hours of interactive and Flex calls (a batch's results come within 24 hours)."""
    return float(estimate["minutes"].sum(min_count=1) or 0.0) / 60


def call_time(estimate: pd.DataFrame) -> str:
    """:func:`call_hours` in words."""
    hours = call_hours(estimate)
    if hours < 1 / 60:
        return "under a minute"
    if hours < 1:
        return f"about {round(hours * 60)} minutes"
    return f"about {hours:,.1f} hours"


def limits_note(estimate: pd.DataFrame) -> str:
    sources = sorted(
        {
            f"{r.model}: {r.rate_limits}"
            for r in estimate.itertuples()
            if r.execution != "batch" and r.requests
        }
    )
    return (
        "times at the rate limits in force (" + "; ".join(sources) + f"; {TIER_SOURCE}; "
        "state yours with client: {rate_limits: {MODEL: {rpm: N, tpm: N}}}), each stage "
        "at most max_concurrency requests at a time, and a user's questions that share a "
        "cached prefix at most prefix_requests_per_minute a minute to OpenAI (its cache "
        "overflows above it)"
    )


def _system(system: str) -> str:
    """``rolling_window_gpt-5-mini`` → ``rolling window``."""
    return system_label(system).split(", ", 1)[0]


def summary_text(estimate: pd.DataFrame, *, max_cost_usd: float | None) -> str:
    """The terminal's lines: one per dataset, stage and model, then the totals against the
    budget."""
    if estimate.empty:
        return "nothing to estimate"
    lines = [
        "estimated bill of this run (list prices; assumptions in memcost/costs/estimate.py):",
        f"  {'dataset':<14} {'for':<20} {'stage':<12} {'model':<22} {'effort':<7} "
        f"{'mode':<11} {'requests':>9} {'tokens in':>9} {'out':>7} {'interactive':>11} "
        f"{'as chosen':>10}  time",
    ]
    measured = False
    for r in estimate.itertuples():
        chosen = "n/a" if pd.isna(r.usd_execution) else f"${r.usd_execution:,.2f}"
        # the memory's model calls are priced from the paper's measured costs (per history
        # token written, per question read), not from tokens counted here: no count is shown
        paper = r.stage in ("write", "read") and r.ledger_stage in PAPER_PRICED
        measured |= paper
        sized = paper and r.ledger_stage == "read" and r.input_tokens > 0
        tokens_in = (
            _tokens(r.input_tokens) + "‡" if sized else "†" if paper else _tokens(r.input_tokens)
        )
        tokens_out = "†" if paper else _tokens(r.output_tokens)
        lines.append(
            f"  {r.dataset:<14} {_system(str(r.system)):<20} {r.ledger_stage:<12} "
            f"{r.model:<22} "
            f"{r.effort or '-':<7} {r.execution:<11} {r.requests:>9,} "
            f"{tokens_in:>9} {tokens_out:>7} "
            f"{'$' + format(r.usd, ',.2f'):>11} {chosen:>10}  {_time(r)}"
        )
    if measured:
        lines.append(
            "  † priced from the paper's measured memory costs (paper §4.2: written, its "
            "prompts per history token and its completions per segment of 10 messages; read, "
            "per question), scaled to the model's prices; tokens are not counted before the "
            "run (the same run offline counts them: -p backend=offline)"
        )
    if (estimate["ledger_stage"].eq("read") & estimate["input_tokens"].gt(0)).any():
        lines.append(
            "  ‡ the memory a system's reader sees, sized from its settings; priced as the "
            f"paper's read (§4.2: {PAPER_RETRIEVED_TOKENS:,} retrieved tokens a question) plus "
            "the tokens it shows more or fewer, at the reader's input price"
            + (
                "; what it shows every question of a user first, at the cached price after "
                "the user's first question"
                if (
                    estimate["ledger_stage"].eq("read") & estimate["cached_input_tokens"].gt(0)
                ).any()
                else ""
            )
        )
    total = float(estimate["usd"].sum())
    budget = "" if max_cost_usd is None else f" (max_cost_usd = {dollars(max_cost_usd)})"
    batches = " plus batches, within 24 hours" if (estimate["execution"] == "batch").any() else ""
    discounted = bool((estimate["execution"] != "interactive").any())
    if not discounted:
        lines.append(f"  total: ${total:,.2f}, {call_time(estimate)} of calls{budget}")
    else:
        lines.append(f"  total, all interactive: ${total:,.2f}{budget}")
        chosen = chosen_total(estimate)
        if chosen is not None:
            lines.append(
                f"  total, with execution {_modes(estimate)}: ${chosen:,.2f}, "
                f"{call_time(estimate)} of calls{batches} (Flex answers are slower)"
            )
        else:
            lines.append(f"  total, with execution {_modes(estimate)}: not known")
            for r in estimate.loc[estimate["usd_execution"].isna()].itertuples():
                lines.append(
                    f"    {r.dataset} {r.ledger_stage}: {r.model} has no {r.execution} "
                    "price in memcost.catalog; the estimate does not guess one"
                )
    lines.append(f"  {limits_note(estimate)}")
    return "\n".join(lines)


def bill(estimate: pd.DataFrame) -> float:
    """The bill in the chosen modes where every stage has a price there, else the
    interactive one."""
    chosen = chosen_total(estimate)
    return float(estimate["usd"].sum()) if chosen is None else chosen


# What a user can change to fit a budget, least change to the study first: batching changes
# only when the answers come; a cheaper judge changes the judge.
FIT_CHANGES: tuple[tuple[str, dict[str, Any]], ...] = (
    (
        "batch the judge: -p 'client={execution: {judge: batch}}'",
        {"client": {"execution": {"judge": "batch"}}},
    ),
    (
        "batch extraction and the judge: -p 'client={execution: {extract: batch, judge: batch}}'",
        {"client": {"execution": {"extract": "batch", "judge": "batch"}}},
    ),
)


def fitting_change(recompute: Any, params: Mapping[str, Any], budget: float) -> str:
    """The first change of :data:`FIT_CHANGES` (then a cheaper judge) whose estimate fits
    ``budget``, as the words to type; else the cheapest with the budget it needs."""
    chosen = dict(normalise_execution(client_option(params, "execution")))
    cheaper = str(params.get("extraction_model") or EXTRACTION_MODEL)
    changes = [
        c
        for c in FIT_CHANGES
        if any(chosen.get(stage) != mode for stage, mode in c[1]["client"]["execution"].items())
    ]
    if str(params.get("judge_model") or JUDGE_MODEL) != cheaper:
        changes.append((f"a cheaper judge: -p judge_model={cheaper}", {"judge_model": cheaper}))
    best = ("", bill(recompute({})))
    for words, overrides in changes:
        try:
            total = bill(recompute(overrides))
        except (KeyError, ValueError):  # e.g. a model with no price in that mode
            continue
        if total <= budget:
            return f"{words} (${total:,.2f})"
        if total < best[1] and not words.startswith("a cheaper judge"):
            best = (words, total)
    raise_to = f"-p max_cost_usd={math.ceil(best[1] * 1.1)}"
    return f"{best[0]}, and {raise_to}" if best[0] else raise_to


def over_budget_line(where: Any, total: float, budget: float, change: str) -> str:
    return (
        f"{where}: the estimated bill {dollars(total)} exceeds max_cost_usd {dollars(budget)}; "
        f"nothing has been spent. Cheapest change that fits: {change}"
    )


# locomo10.json's questions per category 1-5: 282, 321, 96, 841, 446 (1,986 in all); the
# evaluations the paper follows leave category 5 out (1,540 questions judged).
LOCOMO_ADVERSARIAL = 446


@dataclass(frozen=True)
class Shape:
    """What the paper's Tables 1-2 do not say of a benchmark's histories, for counts at its scale:
    turn and session lengths, notebook 01's segments, and the long-context rendering's length
    against Table 1's tokens."""

    rendered: float  # long-context rendering tokens per Table-1 token
    tokens_per_turn: float  # Table-1 tokens
    turns_per_session: float
    # notebook 01's segments per 1,000 Table-1 tokens (None: not measured; counted as ten
    # messages a call, at least one a session)
    segments_per_1k: float | None
    source: str


# Measured on real files (scripts/measure_shape.py: notebook 00's loader, notebook 01's cutter),
# since a bundled sample's invented turns are far shorter than a benchmark's (LoCoMo's sample:
# 11.9 tokens a turn against 27.1; LongMemEval's: 39.8 against 250; PersonaMem's: 31 against
# 143), and scaling from them counted two to four times the extraction calls, and long-context
# prompts up to a fifth too long (the rendering's headers weigh more on short turns).
MEASURED_SHAPES = {
    # all 10 conversations: 159,664 tokens in 5,882 turns and 272 sessions, 699 segments
    "locomo": Shape(1.2668, 27.14, 21.62, 4.378, "the pinned locomo10.json, all of it"),
    # three histories (questions 852ce960, ba358f49, 6a1eabeb; 101,192-101,894 tokens, Table 1's
    # mean is 101,601) of the copy at github.com/MuhammadNoor7/Parallel-Hybrid-Retrieval-
    # Enhancing-Temporal-RAG-via-Concurrent-Graphiti-and-Semantic-Search @3d2d10e: 39, 41 and 40
    # sessions (the authors give ~40), 1,218 turns, 260 segments
    "longmemeval": Shape(
        1.0150, 250.16, 10.15, 0.8533, "three LongMemEval-S histories (40 sessions each)"
    ),
    # the published questions_32k.csv (its sha256, with the CRLF line endings it is published
    # with, is the pinned one; a copy is at github.com/PengHongyiNTU/agentscope @b90e91a):
    # its 222 conversations end on average at message 161.8, one of them the persona (a system
    # message, not dialogue), so 160.8 turns of 22,997 / 160.8 = 143.0 tokens in one session.
    # The contexts file was not at hand: the rendering adds the bundled sample's 2.3 tokens a
    # message (a role label; no sessions, no dates), and segments ended early by 8,000
    # characters are not counted
    "personamem": Shape(
        1.016, 143.0, 160.8, None, "the published questions_32k.csv and the bundled sample"
    ),
}


def measured_shape(conversations: pd.DataFrame, questions: pd.DataFrame, source: str) -> Shape:
    """The :class:`Shape` of a loaded benchmark, as :data:`MEASURED_SHAPES` was measured."""
    stats = conversation_stats(conversations, questions)
    text, turns = float(stats["text_tokens"].sum()), float(stats["n_turns"].sum())
    segments = extraction_segments(stats, MESSAGES_PER_SEGMENT, conversations=conversations)
    return Shape(
        float(stats["history_tokens"].sum()) / text,
        text / turns,
        turns / float(stats["n_sessions"].sum()),
        segments / text * 1000,
        source,
    )


def _spread(total: int, parts: int) -> list[int]:
    base, extra = divmod(total, parts)
    return [base + (i < extra) for i in range(parts)]


def paper_scale_counts(
    dataset: str, conversations: int = 0, questions: int = 0
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(stats, questions)`` at the paper's scale; ``conversations`` / ``questions`` (0: all) keep
    that many, as a sample would (LoCoMo's adversarial share kept)."""
    n, _low, _high, _median, mean = TABLE1[dataset]
    n_questions = TABLE2[dataset][0]
    adversarial = LOCOMO_ADVERSARIAL
    if dataset == "longmemeval" and (conversations or questions):  # one question each
        conversations = questions = min(conversations or n, questions or n)
    if questions and questions < n_questions:
        adversarial = round(LOCOMO_ADVERSARIAL * questions / n_questions)
        n_questions = questions
    n = min(n, conversations or n, n_questions)
    shape = MEASURED_SHAPES[dataset]
    ids = [f"{dataset}-{i:04d}" for i in range(n)]
    asked = _spread(n_questions, n)
    turns = max(1, round(mean / shape.tokens_per_turn))
    stats = pd.DataFrame({
        "conversation_id": ids,
        "n_sessions": max(1, round(turns / shape.turns_per_session)),
        "n_turns": turns,
        "n_questions": asked,
        "text_tokens": mean,
        "history_tokens": round(mean * shape.rendered),
    })  # fmt: skip
    if shape.segments_per_1k:
        stats["n_segments"] = max(1, round(mean * shape.segments_per_1k / 1000))
    owners = np.repeat(ids, asked)
    categories = np.zeros(n_questions, dtype=np.int64)
    if dataset == "locomo":
        # every conversation has adversarial questions: spread them evenly too
        categories[np.linspace(0, n_questions - 1, adversarial).round().astype(int)] = 5
    questions = pd.DataFrame({"conversation_id": owners, "category_id": categories})
    return stats, questions


def file_counts(
    dataset: str, params: Mapping[str, Any]
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """``(stats, questions, conversations)`` of what notebook 00 will keep of the file it reads."""
    source = resolve_source(
        dataset,
        params.get("data_path") or "",
        longmemeval_file=str(params.get("longmemeval_file") or "s"),
    )
    names = ("limit_conversations", "limit_questions", "sample_conversations", "sample_questions")
    selection = tuple((k, int(params.get(k) or 0)) for k in names)
    seed, stratify = int(params.get("sample_seed") or 0), bool(params.get("sample_stratify"))
    changed = source.path.stat()
    counted = _file_counts(
        source, (changed.st_mtime_ns, changed.st_size), selection, seed, stratify
    )
    return tuple(frame.copy() for frame in counted)  # type: ignore[return-value]


@functools.lru_cache(maxsize=4)
def _file_counts(
    source: Any, _changed: tuple[int, int], selection: tuple, seed: int, stratify: bool
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Cached per file, version and selection: the search for a change that fits the budget
    estimates a file again and again."""
    kept = select(load(source), **dict(selection), seed=seed, stratify=stratify)
    stats = conversation_stats(kept.conversations, kept.questions)
    return stats, kept.questions, kept.conversations


def selected_counts(dataset: str, params: Mapping[str, Any]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """:func:`paper_scale_counts` of what a run's notebook-00 parameters keep; another LongMemEval
    file than S is refused, not priced as S."""
    chosen = str(params.get("longmemeval_file") or "s")
    if dataset == "longmemeval" and chosen != "s":
        raise ValueError(
            f"longmemeval_file={chosen}: the paper's Tables 1-2 count LongMemEval-S only, so "
            "there is no paper-scale bill for this file; count the file itself: download it "
            "once (python -m memcost run --params <preset> --steps 00) and estimate again, or "
            "set data_path to a copy"
        )
    return paper_scale_counts(
        dataset,
        int(params.get("sample_conversations") or params.get("limit_conversations") or 0),
        int(params.get("sample_questions") or params.get("limit_questions") or 0),
    )


def profile_note(dataset: str) -> str:
    shape = MEASURED_SHAPES[dataset]
    n, mean, questions = TABLE1[dataset][0], TABLE1[dataset][4], TABLE2[dataset][0]
    segments = (
        f" and {shape.segments_per_1k:.2f} extraction segments per 1,000 tokens"
        if shape.segments_per_1k
        else ""
    )
    return (
        f"{dataset}: paper-scale counts (paper Tables 1-2: {n:,} conversations of "
        f"{mean:,} tokens, {questions:,} questions; rendering x{shape.rendered:.3f}, "
        f"{shape.tokens_per_turn:.1f} tokens a turn, {shape.turns_per_session:.1f} turns a "
        f"session{segments}, measured on {shape.source})"
    )
