"""What notebook 02 reports: answers next to their questions, lexical sanity signals (for the
offline backend; accuracy is the judge's, notebook 04), and the step's metrics."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from memcost.offline.reader import NO_INFORMATION
from memcost.retrieval.recall import recall_by_category
from memcost.text import containment, token_f1


def lexical_match(answer: str, gold: str, *, abstention: bool) -> bool:
    """A rough, judge-free signal: an abstention question is matched by a no-information
    answer; any other by an answer containing at least half of the gold answer's content words.
    Only for the offline backend's sanity; accuracy is the judge's (notebook 04)."""
    if abstention:
        return answer.strip() == NO_INFORMATION or "don't have that information" in answer.lower()
    return containment(gold, answer) >= 0.5


def scored_answers(answers: pd.DataFrame, questions: pd.DataFrame) -> pd.DataFrame:
    """Answers joined with their questions (category, gold) and the lexical signals."""
    keep = ["question_id", "question", "answer", "category", "is_abstention"]
    gold = questions[keep].rename(columns={"answer": "gold"})
    merged = answers.merge(gold, on="question_id", how="left")
    merged["no_information"] = merged["answer"].astype(str).str.strip() == NO_INFORMATION
    merged["lexical_match"] = [
        lexical_match(str(a), str(g), abstention=bool(ab))
        for a, g, ab in zip(merged["answer"], merged["gold"], merged["is_abstention"], strict=True)
    ]
    merged["token_f1"] = [
        token_f1(str(a), str(g)) for a, g in zip(merged["answer"], merged["gold"], strict=True)
    ]
    return merged


def _percentile(values: pd.Series, q: float) -> float | None:
    values = pd.to_numeric(values, errors="coerce").dropna()
    return float(np.percentile(values, q)) if len(values) else None


def read_metrics(scored: pd.DataFrame, *, top_k: int, ef_search: int) -> dict[str, Any]:
    """The numbers notebook 02 records (and a test or the report checks)."""
    recall = pd.to_numeric(scored["evidence_recall"], errors="coerce")
    in_memory = pd.to_numeric(scored["evidence_in_memory"], errors="coerce")
    latency = scored["search_latency_s"]
    by_category = recall_by_category(scored)

    def ms(value: float | None) -> float | None:
        return round(value * 1000, 4) if value is not None else None

    def mean(series: pd.Series) -> float | None:
        series = pd.to_numeric(series, errors="coerce").dropna()
        return round(float(series.mean()), 4) if len(series) else None

    return {
        "questions": len(scored),
        "errors": int(scored["error"].notna().sum()),
        "top_k": top_k,
        "ef_search": ef_search,
        "retrieved_facts_mean": round(float(scored["retrieved_fact_ids"].map(len).mean()), 2)
        if len(scored)
        else 0.0,
        "retrieved_tokens_mean": mean(scored["retrieved_tokens"]),
        "search_latency_p50_ms": ms(_percentile(latency, 50)),
        "search_latency_p95_ms": ms(_percentile(latency, 95)),
        "index_recall_vs_exact": mean(scored["index_recall"]),
        "questions_with_evidence": int(recall.notna().sum()),
        "evidence_recall": mean(recall),
        "evidence_in_memory": mean(in_memory),
        "evidence_recall_by_category": {
            str(r.category): (None if pd.isna(r.evidence_recall) else float(r.evidence_recall))
            for r in by_category.itertuples()
        },
        "no_information_answers": int(scored["no_information"].sum()),
        "lexical_match_rate": mean(scored["lexical_match"].astype(float)),
        "token_f1_mean": mean(scored["token_f1"]),
        "reader_prompt_tokens_mean": mean(scored["prompt_tokens"]),
    }
