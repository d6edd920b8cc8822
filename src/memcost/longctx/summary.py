"""What notebook 03 reports: shared prefixes, answers per system, the metrics (sections 6 to 9)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from memcost.answers import load_answers
from memcost.io import json_safe
from memcost.longctx.answer import messages_for
from memcost.longctx.plan import Planned, prompt_size_table
from memcost.longctx.prompt import HISTORY_END, PROMPT
from memcost.paths import DatasetPaths
from memcost.text import stable_hash


def load_system_answers(ds: DatasetPaths, systems: Iterable[str]) -> pd.DataFrame:
    """The answers of ``systems`` in one frame (the latest record per question)."""
    frames = [load_answers(ds, s) for s in systems if ds.answers_file(s).is_file()]
    frames = [f for f in frames if not f.empty]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def shared_prefixes(planned: Planned, system: str) -> pd.DataFrame:
    """Per conversation: how many distinct prompt beginnings (everything up to ``</history>``)
    its questions' actual messages have. One means the provider can cache it for them all."""
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
    """Per system: questions answered, errors, input tokens (total and per question), context
    tokens, truncation, latency p50/p95 and the measured cached share of input tokens from the
    second question of each conversation on (``NaN`` offline: there is no provider cache)."""
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
    """A metrics value: JSON-safe (NaN as null), floats to 6 decimals."""
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
    """The numbers the report and the tests read from ``metrics/03_answer_long_context.json``.
    ``simulated`` (offline: :func:`memcost.longctx.simulated_cache_summary`) goes under its own
    key, ``simulated_cache``, labelled; the measured ``cached_share_after_first`` stays empty."""
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


__all__ = [
    "answers_summary",
    "load_system_answers",
    "percentile",
    "shared_prefixes",
    "step_metrics",
]
