"""Latency per system: how long a question takes to search and to answer (notebook 05).

From timings the run already holds: the answers files (each record's reader or long-context
call, ``latency_s``, and a memory system's search, ``search_latency_s``) and the ledger (the
question's embedding call). Per system and stage, p50 and p95 over questions:

- ``search``: the question's embedding plus the search (memory systems only);
- ``answer``: the reader's or the long-context model's call;
- ``total``: both, per question.

Offline runs time the classical stand-ins and a local search, not a provider: the ``basis``
column says so, and those numbers are no model's latency. Mem0's paper reports p95 latencies on
LoCoMo (:data:`MEM0_PUBLISHED`); they are shown beside the run's, never mixed into them.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from memcost.answers import answer_systems, load_answers, system_kind
from memcost.paths import RunPaths

# Mem0's paper (arXiv 2504.19413, LoCoMo): p95 seconds of search and of search + answer.
MEM0_PUBLISHED = pd.DataFrame(
    [
        {"system": "memory", "label": "Mem0", "stage": "search", "p95_s": 0.200},
        {"system": "memory", "label": "Mem0", "stage": "total", "p95_s": 1.44},
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
