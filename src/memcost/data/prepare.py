"""From a loaded benchmark to notebook 00's files: select, count, write, and the step's metrics.

:func:`load` reads any of the three benchmarks, :func:`select` keeps part of it (seeded, so the
same parameters always select the same rows), :func:`prepare` computes every table before
anything is written, and :func:`write_prepared` writes the hand-over files and Tables 1-2.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pandas as pd

from memcost.data.benchmark import BenchmarkData
from memcost.data.locomo import load_locomo, locomo_excerpt
from memcost.data.longmemeval import load_longmemeval, longmemeval_excerpt
from memcost.data.personamem import load_personamem, personamem_excerpt
from memcost.data.personamem_v2 import load_personamem_v2, personamem_v2_excerpt
from memcost.data.prepared import write_data_files
from memcost.data.sources import DataSource, display_path
from memcost.data.tables import (
    TABLE1_NOTE,
    TABLE2_NOTE,
    compare_with_paper,
    conversation_stats,
    question_tokens,
    questions_per_category,
    summarize_counts,
    table1,
    table2,
    table_markdown,
)
from memcost.io import json_safe, write_csv, write_text
from memcost.paths import DataError, DatasetPaths, check_dataset
from memcost.text import tokenizer_info

_LOADERS = {
    "locomo": load_locomo,
    "longmemeval": load_longmemeval,
    "personamem": load_personamem,
    "personamem_v2": load_personamem_v2,
}


def load(source: DataSource) -> BenchmarkData:
    """Read and check a dataset's raw files (see :func:`resolve_source` for which)."""
    return _LOADERS[check_dataset(source.dataset)](source)


def native_excerpt(source: DataSource, conversation_id: str, turns: int = 3) -> dict[str, Any]:
    """A few fields of one conversation's record exactly as the raw file holds them, to set
    beside its normalised rows. Reads the file again: a walk-through aid, not part of loading."""
    if check_dataset(source.dataset) == "locomo":
        return locomo_excerpt(source.path, conversation_id, turns)
    if source.dataset == "longmemeval":
        return longmemeval_excerpt(source.path, conversation_id, turns)
    if source.dataset == "personamem":
        return personamem_excerpt(source, conversation_id, turns)
    return personamem_v2_excerpt(source, conversation_id, turns)


def select(
    data: BenchmarkData,
    *,
    limit_conversations: int = 0,
    limit_questions: int = 0,
    sample_conversations: int = 0,
    sample_questions: int = 0,
    seed: int = 0,
    stratify: bool = False,
) -> BenchmarkData:
    """Keep part of a dataset; 0 everywhere keeps all of it.

    Order of operations: a seeded sample of ``sample_conversations`` conversations, then the
    first ``limit_conversations`` of those; among their questions a seeded sample of
    ``sample_questions`` (which keeps at least one question per conversation when there are
    enough), then the first ``limit_questions``. Conversations left without a question are
    dropped (nothing would be asked about them). Everything keeps the source order, so the same
    parameters always select the same rows. With ``stratify`` the question sample keeps each
    category's share (largest remainders) and spreads each category over the conversations in
    turn.
    """
    params = {
        "limit_conversations": limit_conversations,
        "limit_questions": limit_questions,
        "sample_conversations": sample_conversations,
        "sample_questions": sample_questions,
        "seed": seed,
    }
    for name, value in params.items():
        if isinstance(value, bool) or not isinstance(value, int) or (value < 0 and name != "seed"):
            raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
    conversation_ids = list(dict.fromkeys(data.conversations["conversation_id"].tolist()))
    if sample_conversations and sample_conversations < len(conversation_ids):
        rng = random.Random(f"memcost-conversations-{seed}")
        chosen = set(rng.sample(conversation_ids, sample_conversations))
        conversation_ids = [c for c in conversation_ids if c in chosen]
    if limit_conversations:
        conversation_ids = conversation_ids[:limit_conversations]

    questions = data.questions[data.questions["conversation_id"].isin(conversation_ids)]
    if sample_questions and sample_questions < len(questions):
        rng = random.Random(f"memcost-questions-{seed}")
        owners = questions["conversation_id"].tolist()
        picked = (
            _sample_stratified(owners, questions["category_id"].tolist(), sample_questions, rng)
            if stratify
            else _sample_covering(owners, sample_questions, rng)
        )
        questions = questions.iloc[sorted(picked)]
    if limit_questions:
        questions = questions.iloc[:limit_questions]
    if questions.empty:
        raise DataError(f"{data.source.path}: the selection {params} leaves no questions")
    asked = set(questions["conversation_id"].tolist())
    kept = [c for c in conversation_ids if c in asked]
    conversations = data.conversations[data.conversations["conversation_id"].isin(kept)]
    selection = {
        **params,
        "stratify": bool(stratify),
        "conversations": len(kept),
        "questions": len(questions),
        "of_conversations": len(dict.fromkeys(data.conversations["conversation_id"])),
        "of_questions": len(data.questions),
    }
    return replace(
        data,
        conversations=conversations.reset_index(drop=True),
        questions=questions.reset_index(drop=True),
        selection=selection,
        notes=list(data.notes),
        checks=dict(data.checks),
    )


def _sample_covering(groups: Sequence[str], n: int, rng: random.Random) -> list[int]:
    """``n`` indices drawn at random, at least one from every group when ``n`` allows it."""
    members: dict[str, list[int]] = defaultdict(list)
    for index, group in enumerate(groups):
        members[group].append(index)
    if n < len(members):
        return rng.sample(range(len(groups)), n)
    picked = [rng.choice(indices) for indices in members.values()]
    chosen = set(picked)
    rest = [i for i in range(len(groups)) if i not in chosen]
    return picked + rng.sample(rest, n - len(picked))


def _sample_stratified(
    groups: Sequence[str], categories: Sequence[Any], n: int, rng: random.Random
) -> list[int]:
    """``n`` indices with each category's share of them (largest remainders), each category's
    taken from the conversations in turn (one shuffled order shared by all categories), so
    that every conversation gets questions when ``n`` allows it."""
    pools: dict[Any, dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))
    for index, (group, category) in enumerate(zip(groups, categories, strict=True)):
        pools[category][group].append(index)
    sizes = {c: sum(map(len, g.values())) for c, g in pools.items()}
    exact = {c: n * size / len(groups) for c, size in sizes.items()}
    quota = {c: int(x) for c, x in exact.items()}
    for c in sorted(exact, key=lambda c: (quota[c] - exact[c], str(c)))[: n - sum(quota.values())]:
        quota[c] += 1
    order = list(dict.fromkeys(groups))
    rng.shuffle(order)
    turn, picked = 0, []
    for category in sorted(pools, key=str):
        left = {g: rng.sample(ix, len(ix)) for g, ix in pools[category].items()}
        for _ in range(quota[category]):
            while not left.get(order[turn % len(order)]):
                turn += 1
            picked.append(left[order[turn % len(order)]].pop())
            turn += 1
    return picked


@dataclass
class Prepared:
    """Everything notebook 00 writes, computed before anything is written."""

    data: BenchmarkData
    stats: pd.DataFrame
    question_tokens: list[int]
    table1: pd.DataFrame
    table2: pd.DataFrame
    categories: pd.DataFrame


def prepare(data: BenchmarkData) -> Prepared:
    """Count tokens and build Tables 1 and 2 for a (selected) dataset."""
    stats = conversation_stats(data.conversations, data.questions)
    counts = question_tokens(data.questions)
    return Prepared(
        data=data,
        stats=stats,
        question_tokens=counts,
        table1=table1(data.dataset, stats),
        table2=table2(data.dataset, counts),
        categories=questions_per_category(data.questions),
    )


def paper_comparison(prepared: Prepared) -> pd.DataFrame:
    """Our Tables 1 and 2 next to the paper's rows, with a column saying whether they match."""
    return compare_with_paper(prepared.data.dataset, prepared.table1, prepared.table2)


def write_prepared(ds: DatasetPaths, prepared: Prepared) -> dict[str, Path]:
    """Write the data files and tables of one dataset (each file atomically)."""
    ds.ensure()
    name = prepared.data.display_name
    written = write_data_files(
        ds, prepared.data.conversations, prepared.data.questions, prepared.stats
    )
    written.update(
        {
            "table1": ds.table.table1,
            "table1_md": ds.table.table1.with_suffix(".md"),
            "table2": ds.table.table2,
            "table2_md": ds.table.table2.with_suffix(".md"),
            "questions_per_category": ds.table.questions_per_category,
        }
    )
    write_csv(written["table1"], prepared.table1)
    write_text(
        written["table1_md"],
        table_markdown(
            prepared.table1, title=f"Table 1 — {name}: tokens per conversation", note=TABLE1_NOTE
        ),
    )
    write_csv(written["table2"], prepared.table2)
    write_text(
        written["table2_md"],
        table_markdown(
            prepared.table2, title=f"Table 2 — {name}: tokens per question", note=TABLE2_NOTE
        ),
    )
    write_csv(written["questions_per_category"], prepared.categories)
    return written


def prepare_metrics(
    prepared: Prepared, written: Mapping[str, Path] | None = None
) -> dict[str, Any]:
    """The step's metrics (``metrics/00_prepare_data.json``), read by the report and tests."""
    data = prepared.data
    stats = prepared.stats
    return {
        "dataset": data.dataset,
        "source": data.source.describe(),
        "raw_files": len(data.files),
        "raw_sha256": data.files[0].sha256 if data.files else None,  # main file; all: manifest
        "selection": data.selection,
        "n_conversations": int(len(stats)),
        "n_questions": int(len(data.questions)),
        "n_sessions": int(stats["n_sessions"].sum()),
        "n_turns": int(stats["n_turns"].sum()),
        "table1": json_safe(prepared.table1.iloc[0].to_dict()),
        "table2": json_safe(prepared.table2.iloc[0].to_dict()),
        "matches_paper": {
            row.table: bool(row.matches_paper)
            for row in paper_comparison(prepared).drop_duplicates("table").itertuples()
        },
        "history_tokens": summarize_counts(stats["history_tokens"].tolist(), mean_decimals=0),
        "questions_per_category": {
            row.category: int(row.questions) for row in prepared.categories.itertuples()
        },
        "abstention_questions": int(data.questions["is_abstention"].sum()),
        "checks": data.checks,
        "notes": data.notes,
        "tokenizer": tokenizer_info(),
        "outputs": {k: display_path(v) for k, v in (written or {}).items()},
    }
