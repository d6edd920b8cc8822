"""Tables 1 and 2: tokens per conversation and per question, with the paper's conventions.

A conversation counts the o200k tokens of its utterance texts joined by newlines (no speakers,
no dates); a question counts its bare text; the median is the upper median; the mean is rounded
half up (study §5). Beside them: the tokens of the long-context rendering (what is billed), the
questions per category, the comparison with the paper's rows, and a small Markdown writer.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd
from tqdm import tqdm

from memcost import paper
from memcost.data.prepared import STATS_SCHEMA, frame
from memcost.data.render import in_order, render_history
from memcost.paths import DISPLAY_NAMES
from memcost.text import count_tokens_batch

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
    """The text Table 1 counts (study §5): utterance texts joined by newlines, in order; no
    speakers, no dates."""
    ordered = in_order(conversation)
    return "\n".join(ordered["text"].tolist())


def count_tokens(texts: list[str], desc: str) -> list[int]:
    """Token counts in batches (tiktoken's threads), with a progress bar for large inputs."""
    total_chars = sum(len(t) for t in texts)
    if total_chars < 5_000_000:
        return count_tokens_batch(texts)
    counts: list[int] = []
    batch = 16
    with tqdm(total=len(texts), desc=desc, unit="text") as bar:
        for start in range(0, len(texts), batch):
            chunk = texts[start : start + batch]
            counts.extend(count_tokens_batch(chunk))
            bar.update(len(chunk))
    return counts


def conversation_stats(conversations: pd.DataFrame, questions: pd.DataFrame) -> pd.DataFrame:
    """Per conversation: sessions, turns, questions, Table-1 tokens (``text_tokens``) and the
    tokens of the long-context rendering (``history_tokens``, what is billed)."""
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
    """Tokens of each bare question text (Table 2)."""
    return count_tokens(questions["question"].tolist(), "tokens (questions)")


def round_half_up(value: Fraction | float | int, decimals: int = 0) -> int | float:
    """Round halves away from zero (the usual convention), exactly for fractions; Python's
    ``round`` rounds halves to even."""
    scaled = Fraction(value) * 10**decimals
    rounded = (
        math.floor(scaled + Fraction(1, 2))
        if scaled >= 0
        else -math.floor(-scaled + Fraction(1, 2))
    )
    return int(rounded) if decimals == 0 else rounded / 10**decimals


def summarize_counts(values: Sequence[int], *, mean_decimals: int) -> dict[str, int | float]:
    """``n, min, max, median, mean`` with the paper's conventions: the median is the upper
    median (``sorted[n // 2]``) and the mean is rounded half up to ``mean_decimals``."""
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
    """One row ``dataset,n,min,max,median,mean`` (the dataset as the paper names it)."""
    row = {
        "dataset": DISPLAY_NAMES.get(dataset, dataset),
        **summarize_counts(values, mean_decimals=mean_decimals),
    }
    return pd.DataFrame([row], columns=list(TABLE_COLUMNS))


def table1(dataset: str, stats: pd.DataFrame) -> pd.DataFrame:
    """Table 1: tokens per conversation; the mean rounded to an integer."""
    return token_table(dataset, stats["text_tokens"].tolist(), mean_decimals=0)


def table2(dataset: str, counts: Sequence[int]) -> pd.DataFrame:
    """Table 2: tokens per question; the mean rounded to one decimal."""
    return token_table(dataset, counts, mean_decimals=1)


def table_markdown(table: pd.DataFrame, *, title: str = "", note: str = "") -> str:
    """A small Markdown table (numbers with thousands separators, as in the paper)."""

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
    """Questions (and abstention questions) per category, LoCoMo in category-number order."""
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
    """Our Tables 1 and 2 next to the paper's rows, with a column saying whether they match
    (a dataset the paper did not use, the PersonaMem-v2 release, has no paper row; PersonaMem's
    row is labelled with the name the paper gives it)."""
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
