"""Table 3 and what stands beside it (notebook 04): intervals, comparability with the paper,
McNemar, answer length, judge sensitivity, memory's failures (the paper's Table 6)."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from memcost import paper, stats
from memcost.answers import in_system_order, primary, system_kind, system_order
from memcost.calls import OFFLINE
from memcost.io import json_safe
from memcost.judge.questions import JudgePlan, as_list, as_text
from memcost.judge.votes import JudgingRun, question_outcomes
from memcost.memory.facts import read_facts
from memcost.offline import LEXICAL, numerals
from memcost.paper import PAPER_MEMORY
from memcost.paths import DatasetPaths
from memcost.text import containment, content_words, count_tokens_batch, words


def _interval_row(
    correct: np.ndarray, clusters: np.ndarray, *, n_resamples: int, seed: int
) -> dict[str, float]:
    k, n = int(correct.sum()), int(correct.size)
    low, high = stats.wilson_interval(k, n)
    b_low, b_high = stats.cluster_bootstrap_interval(
        correct, clusters, n_resamples=n_resamples, seed=seed
    )
    return {
        "wilson_low": low,
        "wilson_high": high,
        "bootstrap_low": b_low,
        "bootstrap_high": b_high,
    }


def accuracy_table(
    judgments: pd.DataFrame,
    *,
    dataset: str,
    missing_answers: Mapping[str, Sequence[str]] | None = None,
    n_resamples: int = 1000,
    seed: int = 0,
) -> pd.DataFrame:
    """Table 3 for one dataset from the primary prompt's votes: the majority accuracy over judged
    questions with Wilson and cluster-bootstrap intervals; ``strict_accuracy`` (failed, unjudged
    and ``missing_answers`` wrong: the paper's correct ÷ all); ``vote_mean ± vote_std``."""
    main = primary(judgments)
    outcomes = question_outcomes(main)
    spread = stats.mean_std_over_votes(main, ["system"]).set_index("system")
    judges = main.loc[main["unjudged_cause"].ne("answer")]  # votes a judge actually gave
    rows = []
    for system, part in outcomes.groupby("system", sort=False):
        judged = part.loc[part["judged"]]
        correct = judged["correct"].to_numpy(dtype=bool)
        missing = len((missing_answers or {}).get(system, ()))
        row = {
            "dataset": dataset,
            "system": system,
            "kind": system_kind(system),
            "judge_model": single_value(judges.loc[judges["system"] == system, "judge_model"]),
            "backend": single_value(judges.loc[judges["system"] == system, "backend"]),
            "prompt_name": single_value(part["prompt_name"]),
            "n": len(part),
            "judged": len(judged),
            "correct": int(correct.sum()),
            "accuracy": correct.mean() if correct.size else math.nan,
            **_interval_row(
                correct,
                judged["conversation_id"].to_numpy(dtype=object),
                n_resamples=n_resamples,
                seed=seed,
            ),
            "vote_mean": spread.loc[system, "vote_mean"] if system in spread.index else math.nan,
            "vote_std": spread.loc[system, "vote_std"] if system in spread.index else math.nan,
            "votes_per_question": int(
                main.loc[main["system"] == system].groupby("question_id").size().max()
            ),
            # over every question, those the system gave no answer to included (the oracle's
            # questions without an evidence session are not asked, not missing): the paper's
            # "correct / all"
            "strict_accuracy": correct.sum() / (len(part) + missing) if len(part) else math.nan,
            "unjudged": int((~part["judged"]).sum()),
            "answer_errors": int((part["cause"] == "answer").sum()),
            "judge_failures": int((part["cause"] == "judge").sum()),
            "missing_answers": missing,
            "conversations": int(judged["conversation_id"].nunique()),
            "bootstrap_resamples": n_resamples,
            "bootstrap_seed": seed,
        }
        rows.append(row)
    table = pd.DataFrame(rows)
    if not table.empty:
        table = table.sort_values("system", key=lambda s: s.map(system_order))
    return table.reset_index(drop=True)


def single_value(values: pd.Series) -> str:
    found = sorted({str(v) for v in values.dropna()})
    return found[0] if len(found) == 1 else "+".join(found)


def category_table(judgments: pd.DataFrame, *, dataset: str) -> pd.DataFrame:
    outcomes = question_outcomes(primary(judgments))
    rows = []
    for (system, category), part in outcomes.groupby(["system", "category"], sort=False):
        judged = part.loc[part["judged"]]
        k, n = int(judged["correct"].sum()), len(judged)
        low, high = stats.wilson_interval(k, n)
        rows.append(
            {
                "dataset": dataset,
                "system": system,
                "category": category,
                "n": len(part),
                "judged": n,
                "correct": k,
                "accuracy": k / n if n else math.nan,
                "wilson_low": low,
                "wilson_high": high,
                "strict_accuracy": k / len(part) if len(part) else math.nan,
            }
        )
    return in_system_order(pd.DataFrame(rows), ("system", "category"))


def comparability(
    answers: Mapping[str, pd.DataFrame], judge_backend: str, origin: str | None
) -> tuple[bool, list[str]]:
    """Can this run's accuracies be set against the paper's? ``(ok, reasons they cannot)``."""
    reasons = []
    if judge_backend in (OFFLINE, LEXICAL):
        reasons.append("the judge is the offline lexical rule, not GPT-5-mini")
    offline = sorted(
        s for s, f in answers.items() if not f.empty and (f["backend"].astype(str) == OFFLINE).any()
    )
    if offline:
        reasons.append(f"answers of {', '.join(offline)} come from the offline backend")
    if origin == "sample":
        reasons.append("the data are the bundled synthetic samples, not the benchmark")
    elif origin is None:
        reasons.append("the data's origin is not recorded in the manifest")
    return (not reasons, reasons)


def paper_comparison(table3: pd.DataFrame, *, dataset: str, comparable: bool) -> pd.DataFrame:
    """The paper's Table 3 row beside this run's strict accuracy (its measure) and majority
    accuracy, in %."""
    published = paper.TABLE3.get(dataset, {})
    mine = table3.set_index("system") if not table3.empty else pd.DataFrame()
    rows = []
    for system in [*published, *[s for s in mine.index if s not in published]]:
        here = mine.loc[system] if system in mine.index else None
        strict = 100 * float(here["strict_accuracy"]) if here is not None else math.nan
        rows.append(
            {
                "dataset": dataset,
                "system": system,
                "paper_accuracy_pct": published.get(system, math.nan),
                "run_strict_accuracy_pct": strict,
                "run_accuracy_pct": 100 * float(here["accuracy"]) if here is not None else math.nan,
                "difference_pct": strict - published.get(system, math.nan),
                "comparable": comparable and system in published and here is not None,
            }
        )
    return pd.DataFrame(rows)


def _number(value: Any) -> float | None:
    return None if pd.isna(value) else round(float(value), 6)


def _system_metrics(row: Any) -> dict[str, Any]:
    return {
        "accuracy": _number(row.accuracy),
        "strict_accuracy": _number(row.strict_accuracy),
        "vote_mean": _number(row.vote_mean),
        "vote_std": _number(row.vote_std),
        "wilson_95": [_number(row.wilson_low), _number(row.wilson_high)],
        "bootstrap_95": [_number(row.bootstrap_low), _number(row.bootstrap_high)],
        "n": int(row.n),
        "judged": int(row.judged),
        "correct": int(row.correct),
        "unjudged": int(row.unjudged),
        "answer_errors": int(row.answer_errors),
        "judge_failures": int(row.judge_failures),
        "missing_answers": int(row.missing_answers),
        "judge_model": row.judge_model,
    }


def step_metrics(
    table3: pd.DataFrame, plan: JudgePlan, run: JudgingRun, **extra: Any
) -> dict[str, Any]:
    out = {
        "judge_model": run.judge_label,
        "mode": plan.mode,
        "systems": list(plan.items),
        "scored_questions": len(plan.questions),
        "all_questions": plan.all_questions,
        "excluded": plan.excluded,
        "accuracy": {row.system: _system_metrics(row) for row in table3.itertuples()},
        "votes_sent": run.sent,
        "votes_reused": run.reused,
        "unjudged": int(table3["unjudged"].sum()) if not table3.empty else 0,
    }
    out.update({key: json_safe(value) for key, value in extra.items()})
    return out


def mcnemar_table(
    judgments: pd.DataFrame, *, dataset: str, baseline: str = PAPER_MEMORY
) -> pd.DataFrame:
    """Exact McNemar between ``baseline`` and every other system on the questions both had
    judged."""
    outcomes = question_outcomes(primary(judgments))
    judged = outcomes.loc[outcomes["judged"]]
    wide = judged.pivot(index="question_id", columns="system", values="correct")
    rows = []
    if baseline not in wide.columns:
        return pd.DataFrame(columns=["dataset", "system_a", "system_b", "n_paired", "p_value"])
    for other in wide.columns:
        if other == baseline:
            continue
        pair = wide[[baseline, other]].dropna()
        a, b = pair[baseline].astype(bool).to_numpy(), pair[other].astype(bool).to_numpy()
        result = stats.mcnemar_exact(a, b)
        rows.append(
            {
                "dataset": dataset,
                "system_a": baseline,
                "system_b": other,
                "kind_b": system_kind(other),
                "n_paired": result.n,
                "both_correct": result.both_correct,
                "a_only_correct": result.a_only,
                "b_only_correct": result.b_only,
                "both_wrong": result.both_wrong,
                "accuracy_a": a.mean() if a.size else math.nan,
                "accuracy_b": b.mean() if b.size else math.nan,
                "difference_b_minus_a": (b.mean() - a.mean()) if a.size else math.nan,
                "p_value": result.p_value,
                "significant_5pct": result.p_value < 0.05,
            }
        )
    return pd.DataFrame(rows)


def answer_length_table(
    judgments: pd.DataFrame, answers: Mapping[str, pd.DataFrame], *, dataset: str
) -> pd.DataFrame:
    """Answer length against correctness per system; ``auc_longer_correct``: the chance a correct
    answer is longer than a wrong one (lenient judges reward verbose answers)."""
    outcomes = question_outcomes(primary(judgments))
    rows = []
    for system, part in outcomes.loc[outcomes["judged"]].groupby("system", sort=False):
        frame = answers.get(system)
        if frame is None or frame.empty:
            continue
        texts = frame.set_index(frame["question_id"].astype(str))["answer"].fillna("").astype(str)
        part = part.loc[part["question_id"].isin(texts.index)]
        lengths = np.array(count_tokens_batch(texts.loc[part["question_id"]].tolist()), dtype=float)
        rows.append(
            {
                "dataset": dataset,
                "system": system,
                **_length_row(lengths, part["correct"].to_numpy(dtype=bool)),
            }
        )
    return pd.DataFrame(rows)


def _length_row(lengths: np.ndarray, ok: np.ndarray) -> dict[str, float | int]:
    good, bad = lengths[ok], lengths[~ok]
    auc = math.nan
    if good.size and bad.size:
        auc = stats.mann_whitney_u(good, bad) / (good.size * bad.size)
    return {
        "answers": int(lengths.size),
        "median_tokens": float(np.median(lengths)) if lengths.size else math.nan,
        "correct": int(good.size),
        "wrong": int(bad.size),
        "median_tokens_correct": float(np.median(good)) if good.size else math.nan,
        "median_tokens_wrong": float(np.median(bad)) if bad.size else math.nan,
        "mean_tokens_correct": float(good.mean()) if good.size else math.nan,
        "mean_tokens_wrong": float(bad.mean()) if bad.size else math.nan,
        "auc_longer_correct": auc,
    }


def sensitivity_table(judgments: pd.DataFrame, *, dataset: str) -> pd.DataFrame:
    """Every system's accuracy under every judge prompt, and its gap to memory: a gap that moves
    with the prompt is partly the judge's."""
    outcomes = question_outcomes(judgments)
    rows = []
    for (name, system), part in outcomes.groupby(["prompt_name", "system"], sort=False):
        judged = part.loc[part["judged"]]
        rows.append(
            {
                "dataset": dataset,
                "prompt_name": name,
                "system": system,
                "n": len(part),
                "judged": len(judged),
                "accuracy": judged["correct"].mean() if len(judged) else math.nan,
                "strict_accuracy": judged["correct"].sum() / len(part),
            }
        )
    table = pd.DataFrame(rows)
    if table.empty:
        return table
    memory = table.loc[table["system"] == PAPER_MEMORY].set_index("prompt_name")["accuracy"]
    table["gap_to_memory"] = table["accuracy"] - table["prompt_name"].map(memory)
    return table


TAG_TEMPORAL = "temporal marker lost"
TAG_UPDATE = "update not propagated"
TAG_COREFERENCE = "coreference"
TAG_NOT_RETRIEVED = "answer not in retrieved facts"
TAG_NONE = "untagged"
FAILURE_TAGS = (TAG_TEMPORAL, TAG_UPDATE, TAG_COREFERENCE, TAG_NOT_RETRIEVED, TAG_NONE)

_MONTHS = (
    "january february march april may june july august september october november "
    "december jan feb mar apr jun jul aug sep sept oct nov dec"
)
_DATE = re.compile(
    r"\b(?:" + "|".join(_MONTHS.split()) + r"|monday|tuesday|wednesday|thursday|friday|"
    r"saturday|sunday)\b|\b(?:19|20)\d\d\b|\b\d{4}-\d{2}-\d{2}\b|\b\d{1,2}/\d{1,2}\b",
    re.IGNORECASE,
)
_TEMPORAL_Q = re.compile(
    r"^\s*when\b|\bwhat (?:date|day|month|year|time)\b|\bhow long\b|"
    r"\bhow many (?:days|weeks|months|years)\b|\bwhich .* first\b",
    re.IGNORECASE,
)
_UPDATE_Q = re.compile(
    r"\b(?:now|currently|current|these days|anymore|still|latest|most recent|change[ds]?)\b",
    re.IGNORECASE,
)
_PRONOUN = re.compile(
    r"\b(?:he|she|they|him|her|his|hers|their|them|the user|user|someone|"
    r"a friend|the person)\b",
    re.IGNORECASE,
)
_NAME = re.compile(r"(?<![.!?]\s)(?<!^)\b([A-Z][a-z]+)\b")


def _names(*texts: str) -> set[str]:
    """Capitalised words but the first: the people and places a question names."""
    found: set[str] = set()
    for text in texts:
        for match in _NAME.finditer(text):
            word = match.group(1)
            if word.lower() not in _MONTHS.split() and word.lower() not in {"i", "what", "when"}:
                found.add(word.lower())
    return found


def tag_failure(
    question: str,
    reference: str,
    category: str,
    memory_answer: str,
    facts: Sequence[Mapping[str, Any]] | None,
) -> list[str]:
    """Heuristic tags for a question memory got wrong (``facts``: the retrieved ones; ``None``:
    nothing to check): *temporal marker lost*, *update not propagated*, *coreference*, *answer
    not in retrieved facts*."""
    if facts is None:
        return []
    tags: list[str] = []
    texts = [as_text(f.get("text")) for f in facts]
    q_words = set(content_words(question)) - _names(question)
    relevant = [t for t in texts if q_words & set(content_words(t))]
    temporal = category in ("temporal", "temporal-reasoning") or bool(_TEMPORAL_Q.search(question))
    if temporal and not any(_DATE.search(t) for t in relevant):
        tags.append(TAG_TEMPORAL)
    update = category == "knowledge-update" or bool(_UPDATE_Q.search(question))
    stale = any(as_text(f.get("status")) in ("superseded", "deleted") for f in facts)
    echoed = [
        t
        for t in texts
        if memory_answer.strip()
        and containment(memory_answer, t) >= 0.5
        and containment(reference, t) < 0.5
    ]
    if update and (stale or echoed):
        tags.append(TAG_UPDATE)
    names = _names(question)
    if names and relevant:
        named = any(names & set(words(t)) for t in relevant)
        if not named and any(_PRONOUN.search(t) for t in relevant):
            tags.append(TAG_COREFERENCE)
    union = " ".join(texts)
    if containment(numerals(reference), numerals(union)) < 0.5:
        tags.append(TAG_NOT_RETRIEVED)
    return tags or [TAG_NONE]


def facts_if_built(ds: DatasetPaths) -> pd.DataFrame | None:
    """Notebook 01's fact table, or ``None`` without memory for the dataset."""
    try:
        return read_facts(ds)
    except FileNotFoundError:
        return None


def _retrieved(ids: Sequence[str], fact_table: pd.DataFrame | None) -> list[dict[str, str]] | None:
    if fact_table is None:
        return None
    found = [i for i in ids if i in fact_table.index]
    shown = [c for c in ("text", "status", "session_datetime") if c in fact_table.columns]
    rows = fact_table.loc[found, shown].to_dict("records")  # one lookup, not three per fact
    return [
        {
            "fact_id": i,
            "text": as_text(row["text"]),
            "status": as_text(row.get("status")),
            "session_datetime": as_text(row.get("session_datetime")),
        }
        for i, row in zip(found, rows, strict=True)
    ]


def _shown_facts(ids: Sequence[str], retrieved: list[dict[str, str]] | None, shown: int) -> str:
    if retrieved is None:
        return "(facts.parquet not available: ids " + ", ".join(ids[:shown]) + ")"
    return " | ".join(
        f"[{f['session_datetime'][:10] or 'no date'}] {f['text']}" for f in retrieved[:shown]
    )


def _by_question(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.set_index(frame["question_id"].astype(str))


def _failure_row(
    qid: str,
    right: list[str],
    q: pd.DataFrame,
    mem: pd.DataFrame,
    lc_answers: pd.DataFrame,
    fact_table: pd.DataFrame | None,
    shown_facts: int,
) -> dict[str, Any]:
    ids = (
        [str(i) for i in as_list(mem.loc[qid].get("retrieved_item_ids"))]
        if qid in mem.index
        else []
    )
    retrieved = _retrieved(ids, fact_table)
    question, reference = str(q.loc[qid, "question"]), str(q.loc[qid, "answer"])
    category = as_text(q.loc[qid, "category"])
    memory_answer = as_text(mem.loc[qid, "answer"]) if qid in mem.index else ""
    tags = tag_failure(question, reference, category, memory_answer, retrieved)
    return {
        "question_id": qid,
        "conversation_id": str(q.loc[qid, "conversation_id"]),
        "category": category,
        "question": question,
        "reference": reference,
        "memory_answer": memory_answer,
        "long_context_systems": ", ".join(right),
        "long_context_answer": as_text(lc_answers.loc[qid, "answer"]),
        "retrieved": len(ids),
        "retrieved_facts": _shown_facts(ids, retrieved, shown_facts),
        "tags": "; ".join(tags),
    }


def _tag_counts(table: pd.DataFrame) -> pd.DataFrame:
    counts = {tag: 0 for tag in FAILURE_TAGS}
    for value in table.get("tags", pd.Series(dtype=str)):
        for tag in filter(None, str(value).split("; ")):
            counts[tag] += 1
    return pd.DataFrame({"tag": list(counts), "questions": list(counts.values())})


def failure_analysis(
    judgments: pd.DataFrame,
    answers: Mapping[str, pd.DataFrame],
    questions: pd.DataFrame,
    facts: pd.DataFrame | None,
    *,
    memory: str = PAPER_MEMORY,
    shown_facts: int = 5,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Questions long context got right and memory wrong, with the retrieved facts and tags (Table 6
    style), and the count per tag (without ``facts``: fact ids, no tags)."""
    outcomes = question_outcomes(primary(judgments))
    judged = outcomes.loc[outcomes["judged"]]
    wide = judged.pivot(index="question_id", columns="system", values="correct")
    lc = [s for s in wide.columns if system_kind(s) == "long_context"]
    empty = pd.DataFrame(columns=["question_id", "tags"])
    if memory not in wide.columns or not lc or memory not in answers:
        return empty, _tag_counts(empty)
    lc_right = wide[lc].eq(True)
    chosen = wide.index[wide[memory].eq(False) & lc_right.any(axis=1)]
    q, mem = _by_question(questions), _by_question(answers[memory])
    fact_table = None
    if facts is not None and not facts.empty:
        fact_table = facts.set_index(facts["fact_id"].astype(str))
    rows = []
    for qid in chosen:
        right = [s for s in lc if lc_right.loc[qid, s]]
        rows.append(
            _failure_row(
                qid, right, q, mem, _by_question(answers[right[0]]), fact_table, shown_facts
            )
        )
    table = pd.DataFrame(rows)
    return (table if not table.empty else empty), _tag_counts(table)
