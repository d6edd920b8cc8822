"""From a loaded benchmark to notebook 00's files, and Tables 1-2 with the paper's counting
conventions (paper §3.3)."""

from __future__ import annotations

import math
import random
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from memcost import paper
from memcost.data.benchmark import (
    STATS_SCHEMA,
    BenchmarkData,
    frame,
    in_order,
    render_history,
    write_data_files,
)
from memcost.data.locomo import load_locomo, locomo_excerpt
from memcost.data.longmemeval import load_longmemeval, longmemeval_excerpt
from memcost.data.personamem import (
    load_personamem,
    load_personamem_v2,
    personamem_excerpt,
    personamem_v2_excerpt,
)
from memcost.data.sources import DataSource, display_path
from memcost.io import Bar, json_safe, write_csv, write_text
from memcost.paths import DISPLAY_NAMES, DataError, DatasetPaths, check_dataset
from memcost.text import count_tokens_batch, tokenizer_info

TABLE_COLUMNS: tuple[str, ...] = ("dataset", "n", "min", "max", "median", "mean")
TABLE1_NOTE = (
    "o200k_base tokens of each conversation's utterance texts joined by newlines "
    "(no speakers, no dates); median = upper median; mean rounded half up."
)
TABLE2_NOTE = (
    "o200k_base tokens of each bare question text; median = upper median; mean "
    "rounded half up to one decimal."
)


def table_text(conversation: pd.DataFrame) -> str:
    """The text Table 1 counts (paper §3.3): utterance texts joined by newlines, no speakers, no
    dates."""
    ordered = in_order(conversation)
    return "\n".join(ordered["text"].tolist())


def count_tokens(texts: list[str], desc: str) -> list[int]:
    total_chars = sum(len(t) for t in texts)
    if total_chars < 5_000_000:
        return count_tokens_batch(texts)
    counts: list[int] = []
    batch = 16
    with Bar(total=len(texts), desc=desc, unit="text") as bar:
        for start in range(0, len(texts), batch):
            chunk = texts[start : start + batch]
            counts.extend(count_tokens_batch(chunk))
            bar.update(len(chunk))
    return counts


def conversation_stats(conversations: pd.DataFrame, questions: pd.DataFrame) -> pd.DataFrame:
    """Per conversation: sessions, turns, questions, ``text_tokens`` (Table 1) and
    ``history_tokens`` (the long-context rendering, what is billed)."""
    ids: list[str] = []
    texts: list[str] = []
    rendered: list[str] = []
    sessions: list[int] = []
    turns: list[int] = []
    first: list[str | None] = []
    last: list[str | None] = []
    for conversation_id, group in conversations.groupby("conversation_id", sort=False):
        ids.append(str(conversation_id))
        texts.append(table_text(group))
        rendered.append(render_history(group))
        sessions.append(int(group["session_index"].nunique()))
        turns.append(len(group))
        dates = group["session_datetime"].dropna()
        first.append(str(dates.min()) if len(dates) else None)
        last.append(str(dates.max()) if len(dates) else None)
    asked = Counter(questions["conversation_id"].tolist())
    columns = {
        "conversation_id": ids,
        "n_sessions": sessions,
        "n_turns": turns,
        "n_questions": [asked.get(c, 0) for c in ids],
        "text_tokens": count_tokens(texts, "tokens (utterances)"),
        "history_tokens": count_tokens(rendered, "tokens (long-context rendering)"),
        "first_session_datetime": first,
        "last_session_datetime": last,
    }
    return frame(columns, STATS_SCHEMA)


def question_tokens(questions: pd.DataFrame) -> list[int]:
    return count_tokens(questions["question"].tolist(), "tokens (questions)")


def round_half_up(value: Fraction | float | int, decimals: int = 0) -> int | float:
    """Halves away from zero, exactly for fractions (``round`` rounds them to even)."""
    scaled = Fraction(value) * 10**decimals
    rounded = (
        math.floor(scaled + Fraction(1, 2))
        if scaled >= 0
        else -math.floor(-scaled + Fraction(1, 2))
    )
    return int(rounded) if decimals == 0 else rounded / 10**decimals


def summarize_counts(values: Sequence[int], *, mean_decimals: int) -> dict[str, int | float]:
    """``n, min, max, median, mean``: the upper median and the mean rounded half up, as the paper
    counts."""
    ordered = sorted(int(v) for v in values)
    if not ordered:
        raise ValueError("no values to summarise")
    n = len(ordered)
    return {
        "n": n,
        "min": ordered[0],
        "max": ordered[-1],
        "median": ordered[n // 2],
        "mean": round_half_up(Fraction(sum(ordered), n), mean_decimals),
    }


def token_table(dataset: str, values: Sequence[int], *, mean_decimals: int) -> pd.DataFrame:
    row = {
        "dataset": DISPLAY_NAMES.get(dataset, dataset),
        **summarize_counts(values, mean_decimals=mean_decimals),
    }
    return pd.DataFrame([row], columns=list(TABLE_COLUMNS))


def table1(dataset: str, stats: pd.DataFrame) -> pd.DataFrame:
    return token_table(dataset, stats["text_tokens"].tolist(), mean_decimals=0)


def table2(dataset: str, counts: Sequence[int]) -> pd.DataFrame:
    return token_table(dataset, counts, mean_decimals=1)


def table_markdown(table: pd.DataFrame, *, title: str = "", note: str = "") -> str:

    def cell(value: Any) -> str:
        if isinstance(value, bool) or value is None:
            return str(value)
        if isinstance(value, (int, np.integer)):
            return f"{int(value):,}"
        if isinstance(value, (float, np.floating)):
            return f"{float(value):,.1f}"
        return str(value)

    header = list(table.columns)
    lines = [f"**{title}**", ""] if title else []
    lines += ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += [
        "| " + " | ".join(cell(v) for v in row) + " |" for row in table.itertuples(index=False)
    ]
    if note:
        lines += ["", note]
    return "\n".join(lines) + "\n"


def questions_per_category(questions: pd.DataFrame) -> pd.DataFrame:
    """Questions and abstention questions per category."""
    grouped = (
        questions.groupby(["category"], sort=False)
        .agg(
            category_id=("category_id", "first"),
            questions=("question_id", "size"),
            abstention=("is_abstention", "sum"),
        )
        .reset_index()
    )
    grouped["abstention"] = grouped["abstention"].astype("int64")
    key = grouped["category_id"].fillna(10**6).astype("int64")
    return (
        grouped.assign(_key=key)
        .sort_values(["_key", "category"])
        .drop(columns="_key")
        .reset_index(drop=True)[["category", "category_id", "questions", "abstention"]]
    )


def compare_with_paper(dataset: str, table1: pd.DataFrame, table2: pd.DataFrame) -> pd.DataFrame:
    """Our Tables 1-2 beside the paper's rows, matched or not (no row for a dataset the paper did
    not use)."""
    rows = []
    for name, ours, published in (
        ("Table 1 (conversation)", table1, paper.TABLE1),
        ("Table 2 (question)", table2, paper.TABLE2),
    ):
        mine = tuple(ours.iloc[0][c] for c in TABLE_COLUMNS[1:])
        rows.append(
            {"table": name, "source": "this run", **dict(zip(TABLE_COLUMNS[1:], mine, strict=True))}
        )
        theirs = published.get(dataset)
        if theirs is None:
            rows[-1]["matches_paper"] = None
            continue
        label = 'paper ("PersonaMem v2")' if dataset == "personamem" else "paper"
        rows.append(
            {"table": name, "source": label, **dict(zip(TABLE_COLUMNS[1:], theirs, strict=True))}
        )
        rows[-2]["matches_paper"] = rows[-1]["matches_paper"] = bool(
            all(float(a) == float(b) for a, b in zip(mine, theirs, strict=True))
        )
    return pd.DataFrame(rows, dtype=object)  # object: integers stay integers next to 12.0


_LOADERS = {
    "locomo": load_locomo,
    "longmemeval": load_longmemeval,
    "personamem": load_personamem,
    "personamem_v2": load_personamem_v2,
}


def load(source: DataSource) -> BenchmarkData:
    try:
        return _LOADERS[check_dataset(source.dataset)](source)
    except UnicodeError as exc:  # JSON allows a lone surrogate ("\ud800"), no text can hold one
        bad = exc.object[exc.start : exc.end] if isinstance(exc.object, str) else "?"
        raise DataError(
            f"{source.path}: holds text that is not valid Unicode ({bad!r}: {exc.reason}); "
            "fix the file or download it again"
        ) from None


def native_excerpt(source: DataSource, conversation_id: str, turns: int = 3) -> dict[str, Any]:
    """A few fields of one conversation exactly as the raw file holds them (a walk-through aid)."""
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
    """Keep part of a dataset (0 everywhere: all): a seeded sample of conversations, the first
    ``limit_conversations``; among their questions a seeded sample (one per conversation at least
    when possible; ``stratify``: each category's share, spread over the conversations), the first
    ``limit_questions``; conversations without a question dropped, source order kept."""
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
    """``n`` indices at random, one from every group when ``n`` allows."""
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
    """``n`` indices with each category's share (largest remainders), each taken from the
    conversations in turn."""
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
    data: BenchmarkData
    stats: pd.DataFrame
    question_tokens: list[int]
    table1: pd.DataFrame
    table2: pd.DataFrame
    categories: pd.DataFrame


def prepare(data: BenchmarkData) -> Prepared:
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
    return compare_with_paper(prepared.data.dataset, prepared.table1, prepared.table2)


def write_prepared(ds: DatasetPaths, prepared: Prepared) -> dict[str, Path]:
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
