"""What prompt caching saves: each conversation's shared prefix, the catalog's cache rule simulated
offline (labelled SIMULATED, never billed), and notebook 03's report."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from memcost.answers import load_answers
from memcost.catalog import (
    CACHED_INPUT_MIN_TOKENS,
    CACHED_INPUT_STEP_TOKENS,
    MAX_REQUESTS_PER_PREFIX_PER_MINUTE,
    PrefixCache,
    cacheable,
    shared_prefix,
)
from memcost.io import json_safe
from memcost.longctx.history import HEAD, HISTORY_END, INSTRUCTIONS, PROMPT
from memcost.longctx.plan import Plan, Planned, messages_for, prompt_size_table
from memcost.paths import DatasetPaths
from memcost.text import decode, encode, stable_hash


def prompt_token_ids(plan: Plan) -> list[int]:
    return [t for _, text in messages_for(plan) for t in encode(text)]


@dataclass(frozen=True)
class PrefixShare:
    """Two prompts about one conversation: what they share and what the second gets cached."""

    first_question_id: str
    second_question_id: str
    first_tokens: int
    second_tokens: int
    shared_tokens: int  # identical leading tokens
    cached_tokens: int  # what the cache can serve the second prompt
    before: str  # the text just before the prompts diverge
    first_after: str  # the first prompt's text just after
    second_after: str  # the second prompt's text just after

    @property
    def cached_share(self) -> float:
        return self.cached_tokens / self.second_tokens if self.second_tokens else 0.0


def prefix_share(first: Plan, second: Plan, *, show_tokens: int = 12) -> PrefixShare:
    """Two plans' prompts compared token by token: where they diverge, what the second would get
    cached."""
    a, b = prompt_token_ids(first), prompt_token_ids(second)
    shared = shared_prefix(a, b)
    return PrefixShare(
        first_question_id=first.question_id,
        second_question_id=second.question_id,
        first_tokens=len(a),
        second_tokens=len(b),
        shared_tokens=shared,
        cached_tokens=min(cacheable(shared), len(b)),
        before=decode(a[max(0, shared - show_tokens) : shared]),
        first_after=decode(a[shared : shared + show_tokens]),
        second_after=decode(b[shared : shared + show_tokens]),
    )


SIMULATION_LABEL = (
    "SIMULATED (offline): memcost.catalog's prompt-cache rule, not a provider's report"
)
DEFAULT_GAP_S = 60.0 / MAX_REQUESTS_PER_PREFIX_PER_MINUTE  # the dispatcher's pace per prefix


class PromptIds:
    """o200k ids of plans' prompts from parts encoded once (the parts end where o200k always splits,
    so they concatenate to the whole's ids)."""

    def __init__(self) -> None:
        self._fixed = (
            encode(PROMPT.system),
            encode(HEAD),
            encode(INSTRUCTIONS),
        )
        self._contexts: dict[tuple, np.ndarray] = {}

    def __call__(self, plan: Plan) -> np.ndarray:
        system, head, instructions = self._fixed
        key = plan.context.key
        if key not in self._contexts:  # one conversation at a time: its prompts' common start
            start = [*system, *head, *encode(plan.context.text), *instructions]
            self._contexts = {key: np.array(start, dtype=np.int64)}
        question = np.array(encode(plan.question_block), dtype=np.int64)
        return np.concatenate([self._contexts[key], question])


@dataclass(frozen=True)
class CacheStep:
    position: int  # 1 for the conversation's first question
    question_id: str
    arrival_s: float
    prompt_tokens: int
    shared_tokens: int  # leading tokens identical to the previous question's prompt
    cached_tokens: int  # what the rule serves from the cache
    reason: str


def _reason(
    position: int, prompt: int, shared: int, cached: int, elapsed: float, cache: PrefixCache
) -> str:
    if position == 1:
        kept = (
            "remembered"
            if prompt >= CACHED_INPUT_MIN_TOKENS
            else (f"not remembered: under {CACHED_INPUT_MIN_TOKENS:,} tokens")
        )
        return f"first question: nothing sent before it ({kept})"
    if cached:
        steps = (cached - CACHED_INPUT_MIN_TOKENS) // CACHED_INPUT_STEP_TOKENS
        return (
            f"hit: {shared:,} shared tokens, rounded down to {CACHED_INPUT_MIN_TOKENS:,} + "
            f"{steps} × {CACHED_INPUT_STEP_TOKENS}"
        )
    if shared < CACHED_INPUT_MIN_TOKENS:
        return f"miss: the shared prefix ({shared:,}) is under {CACHED_INPUT_MIN_TOKENS:,} tokens"
    if elapsed > cache.retention_s:
        return (
            f"miss: {elapsed:,.0f} s since the last use, over the {cache.retention_s:,.0f} s kept"
        )
    return (
        f"miss: over {cache.max_per_minute} requests a minute for this prefix, sent to a "
        "machine that has not seen it"
    )


def simulate_conversation(
    plans: Sequence[Plan],
    *,
    gap_s: float = DEFAULT_GAP_S,
    ids: PromptIds | None = None,
    cache: PrefixCache | None = None,
) -> list[CacheStep]:
    """One conversation's questions ``gap_s`` apart through one :class:`PrefixCache`: what it serves
    each, and why."""
    if gap_s < 0:
        raise ValueError(f"gap_s must be at least 0 seconds, got {gap_s}")
    if len(plans) == 1 and cache is None:
        # asked once (every LongMemEval history): a fresh cache has nothing to serve the first
        # prompt, so there is no need to tokenise a 100k-token history to learn that
        plan = plans[0]
        return [
            CacheStep(
                1,
                plan.question_id,
                0.0,
                plan.prompt_tokens,
                0,
                0,
                _reason(1, plan.prompt_tokens, 0, 0, gap_s, PrefixCache()),
            )
        ]
    ids = ids or PromptIds()
    cache = cache or PrefixCache(keep=1)
    key = plans[0].conversation_id if plans else None
    steps: list[CacheStep] = []
    previous: list[int] = []
    for i, plan in enumerate(plans):
        prompt = ids(plan)
        now = i * gap_s
        cached = cache.lookup(prompt, now, key)
        shared = shared_prefix(previous, prompt)
        steps.append(
            CacheStep(
                i + 1,
                plan.question_id,
                now,
                len(prompt),
                shared,
                cached,
                _reason(i + 1, len(prompt), shared, cached, gap_s, cache),
            )
        )
        previous = prompt
    return steps


def _by_conversation(plans: Iterable[Plan], system: str) -> dict[str, list[Plan]]:
    groups: dict[str, list[Plan]] = {}
    for p in plans:
        if p.system == system:
            groups.setdefault(p.conversation_id, []).append(p)
    return groups


def simulate_prompt_cache(
    planned: Planned, *, systems: Sequence[str] | None = None, gap_s: float = DEFAULT_GAP_S
) -> pd.DataFrame:
    """Every planned question through a fresh simulated cache per system and conversation, a row
    each."""
    ids = PromptIds()
    rows = []
    for system in systems or planned.systems:
        for conversation, plans in _by_conversation(planned.plans, system).items():
            for step in simulate_conversation(plans, gap_s=gap_s, ids=ids):
                rows.append({"system": system, "conversation_id": conversation, **step.__dict__})
    frame = pd.DataFrame(rows)
    return frame.rename(columns={"cached_tokens": "simulated_cached_tokens"})


def simulated_cache_summary(steps: pd.DataFrame) -> pd.DataFrame:
    """Per system: questions, prompt and simulated cached tokens, their share of all input and of
    the later questions' (the cost model assumes 100%)."""
    rows = []
    for system, part in steps.groupby("system", sort=False):
        later = part.loc[part["position"] > 1]
        total, later_total = int(part["prompt_tokens"].sum()), int(later["prompt_tokens"].sum())
        cached = int(part["simulated_cached_tokens"].sum())
        rows.append(
            {
                "system": system,
                "questions": len(part),
                "conversations": part["conversation_id"].nunique(),
                "prompt_tokens": total,
                "simulated_cached_tokens": cached,
                "simulated_cached_share": cached / total if total else float("nan"),
                "later_questions": len(later),
                "simulated_share_after_first": (
                    int(later["simulated_cached_tokens"].sum()) / later_total
                    if later_total
                    else float("nan")
                ),
                "source": SIMULATION_LABEL,
            }
        )
    return pd.DataFrame(rows)


def load_system_answers(ds: DatasetPaths, systems: Iterable[str]) -> pd.DataFrame:
    frames = [load_answers(ds, s) for s in systems if ds.answers_file(s).is_file()]
    frames = [f for f in frames if not f.empty]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def shared_prefixes(planned: Planned, system: str) -> pd.DataFrame:
    """Per conversation: distinct prompt beginnings up to ``</history>`` (one: cacheable
    for all)."""
    seen: dict[str, set[int]] = defaultdict(set)
    questions: dict[str, int] = defaultdict(int)
    prefix_tokens: dict[str, int] = {}
    for p in planned.plans:
        if p.system != system:
            continue
        (_, system_text), (_, user_text) = messages_for(p)
        prefix = system_text + "\x00" + user_text[: user_text.index(HISTORY_END)]
        seen[p.conversation_id].add(stable_hash(prefix))
        questions[p.conversation_id] += 1
        prefix_tokens[p.conversation_id] = p.prefix_tokens
    return pd.DataFrame(
        {
            "conversation_id": list(seen),
            "questions": [questions[c] for c in seen],
            "distinct_prefixes": [len(v) for v in seen.values()],
            "prefix_tokens": [prefix_tokens[c] for c in seen],
        }
    )


def percentile(values: Sequence[float] | pd.Series, q: float) -> float:
    array = np.asarray(pd.Series(values).dropna(), dtype=float)
    return float(np.percentile(array, q)) if array.size else float("nan")


def _cached_share(later: pd.DataFrame, offline: bool) -> float:
    if offline or later.empty or later["prompt_tokens"].sum() == 0:
        return float("nan")
    return float(later["cached_prompt_tokens"].sum() / later["prompt_tokens"].sum())


def _system_row(system: str, part: pd.DataFrame, first: set[tuple[str, str]]) -> dict[str, Any]:
    ok = part.loc[part["error"].isna()]
    later = ok.loc[[(system, q) not in first for q in ok["question_id"]]]
    offline = bool((part["backend"] == "offline").all())
    return {
        "answered": len(ok),
        "errors": int(part["error"].notna().sum()),
        "prompt_tokens": int(ok["prompt_tokens"].sum()),
        "prompt_tokens_per_question": float(ok["prompt_tokens"].mean()),
        "context_tokens_per_question": float(ok["context_tokens"].mean()),
        "completion_tokens": int(ok["completion_tokens"].sum()),
        "reasoning_tokens": int(ok["reasoning_tokens"].sum()),
        "truncated_questions": int((ok["dropped_tokens"] > 0).sum()),
        "dropped_tokens": int(ok["dropped_tokens"].sum()),
        "latency_p50_s": percentile(ok["latency_s"], 50),
        "latency_p95_s": percentile(ok["latency_s"], 95),
        "later_questions": len(later),
        "cached_share_after_first": _cached_share(later, offline),
        "assumed_share": 1.0,
        "backend": ",".join(sorted(part["backend"].astype(str).unique())),
    }


def answers_summary(answers: pd.DataFrame, planned: Planned) -> pd.DataFrame:
    """Per system: answers, errors, tokens, truncation, latency p50/p95, the measured cached share
    after the first question (NaN offline)."""
    first = planned.first_questions()
    rows = []
    for system in planned.systems:
        part = answers.loc[answers["system"] == system] if not answers.empty else answers
        n_planned = sum(p.system == system for p in planned.plans)
        model = next(p.model for p in planned.plans if p.system == system)
        row = {"system": system, "model": model, "planned": n_planned}
        rows.append(
            {**row, "answered": 0} if part.empty else {**row, **_system_row(system, part, first)}
        )
    return pd.DataFrame(rows)


def _clean(value: Any) -> Any:
    value = json_safe(value)
    return round(value, 6) if isinstance(value, float) else value


def step_metrics(
    planned: Planned,
    summary: pd.DataFrame,
    *,
    backend: str,
    written: Mapping[str, int],
    ds: DatasetPaths,
    simulated: pd.DataFrame | None = None,
) -> dict[str, Any]:
    """``metrics/03_answer_long_context.json``; ``simulated`` goes under ``simulated_cache``,
    labelled."""
    tokens = [h.tokens for h in planned.histories.values()]
    offline = "backend" not in summary or bool(
        summary["backend"].fillna("offline").eq("offline").all()
    )
    return {
        "backend": backend,
        "prompt_version": PROMPT.id,
        "cache_measured": not offline,
        "cache_note": (
            "offline backend: no provider prompt cache, cached share not measured"
            if offline
            else "cached_share_after_first: provider-reported cached input tokens / input "
            "tokens of the 2nd and later questions of each conversation (assumed: 1.0)"
        ),
        "conversations": len(planned.histories),
        "questions": len({p.question_id for p in planned.plans}),
        "history_tokens": {
            "min": int(min(tokens)),
            "median": float(np.median(tokens)),
            "max": int(max(tokens)),
            "total": int(sum(tokens)),
        },
        "fit": [{k: _clean(v) for k, v in r.items()} for r in planned.fit.to_dict("records")],
        "prompt_tokens_per_conversation": {
            r["system"]: {k: _clean(r[k]) for k in ("min", "median", "max")}
            for r in prompt_size_table(planned).to_dict("records")
        },
        "skipped": planned.skipped.groupby("system").size().to_dict()
        if not planned.skipped.empty
        else {},
        "systems": {
            r["system"]: {k: _clean(v) for k, v in r.items() if k != "system"}
            for r in summary.to_dict("records")
        },
        "answers_written_now": dict(written),
        "simulated_cache": {
            r["system"]: {k: _clean(v) for k, v in r.items() if k != "system"}
            for r in simulated.to_dict("records")
        }
        if simulated is not None and not simulated.empty
        else {},
        "answer_files": [
            str(ds.answers_file(s).relative_to(ds.root))
            for s in planned.systems
            if ds.answers_file(s).is_file()
        ],
    }
