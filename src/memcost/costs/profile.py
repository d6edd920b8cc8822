"""The counts of a whole benchmark without its data: the paper's Tables 1-2, shaped like the
bundled sample, for the estimate before anything is downloaded.

The estimate after notebook 00 (:mod:`memcost.costs.estimate`) counts the real files. Without
them (no network, or a figure for the README), :func:`paper_scale_counts` builds the same
inputs from published numbers:

- conversations and their Table-1 tokens: the paper's Table 1 (``n`` conversations of the
  mean token count each; the total is the table's, the spread is not used);
- questions: the paper's Table 2 count, spread evenly over the conversations; LoCoMo's
  category-5 (adversarial) questions, which the judge leaves out by default, are
  :data:`LOCOMO_ADVERSARIAL` of them;
- what the counts do not say, measured on the bundled sample of the same benchmark (same
  layout, same rendering): the long-context rendering's tokens per Table-1 token (speakers,
  dates and session headers added), Table-1 tokens per turn, turns per session.

The figures it gives are labelled as such (:func:`profile_note`). The bundled samples are
invented, with shorter turns than the real benchmarks: the turns per conversation (the number
of extraction requests and the time estimate) and the rendering overhead (the long-context
rows) come out high. The figures that depend only on published counts are exact to the
estimate's assumptions: the write bill (Table-1 tokens), the reading and judging bills
(questions), and so what batching or Flex saves on them.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import Any

import numpy as np
import pandas as pd

from memcost.data import conversation_stats, load, sample_path
from memcost.data.benchmark import as_source
from memcost.paper import TABLE1, TABLE2

# locomo10.json's questions per category 1-5: 282, 321, 96, 841, 446 (1,986 in all); the
# evaluations the paper follows leave category 5 out (1,540 questions judged).
LOCOMO_ADVERSARIAL = 446


@cache
def sample_shape(dataset: str) -> tuple[float, float, float]:
    """``(rendered tokens per Table-1 token, Table-1 tokens per turn, turns per session)`` of
    the bundled sample of ``dataset``."""
    data = load(as_source(sample_path(dataset), dataset))
    stats = conversation_stats(data.conversations, data.questions)
    text, turns = float(stats["text_tokens"].sum()), float(stats["n_turns"].sum())
    return (
        float(stats["history_tokens"].sum()) / text,
        text / turns,
        turns / float(stats["n_sessions"].sum()),
    )


def _spread(total: int, parts: int) -> list[int]:
    """``total`` split into ``parts`` integers that differ by at most one."""
    base, extra = divmod(total, parts)
    return [base + (i < extra) for i in range(parts)]


def paper_scale_counts(
    dataset: str, conversations: int = 0, questions: int = 0
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(stats, questions)`` for :func:`memcost.costs.estimate.estimate_counts` at the paper's
    scale: ``stats`` in the shape of ``conversation_stats.parquet``, ``questions`` with
    ``conversation_id`` and ``category_id``. ``conversations`` / ``questions`` (0: all) keep
    that many, as a run's sample would (questions spread evenly, LoCoMo's adversarial share
    kept)."""
    n, _low, _high, _median, mean = TABLE1[dataset]
    n_questions = TABLE2[dataset][0]
    adversarial = LOCOMO_ADVERSARIAL
    if dataset == "longmemeval" and (conversations or questions):  # one question each
        conversations = questions = min(conversations or n, questions or n)
    if questions and questions < n_questions:
        adversarial = round(LOCOMO_ADVERSARIAL * questions / n_questions)
        n_questions = questions
    n = min(n, conversations or n, n_questions)
    rendered, per_turn, per_session = sample_shape(dataset)
    ids = [f"{dataset}-{i:04d}" for i in range(n)]
    asked = _spread(n_questions, n)
    turns = max(1, round(mean / per_turn))
    stats = pd.DataFrame({
        "conversation_id": ids,
        "n_sessions": max(1, round(turns / per_session)),
        "n_turns": turns,
        "n_questions": asked,
        "text_tokens": mean,
        "history_tokens": round(mean * rendered),
    })  # fmt: skip
    owners = np.repeat(ids, asked)
    categories = np.zeros(n_questions, dtype=np.int64)
    if dataset == "locomo":
        # every conversation has adversarial questions: spread them evenly too
        categories[np.linspace(0, n_questions - 1, adversarial).round().astype(int)] = 5
    questions = pd.DataFrame({"conversation_id": owners, "category_id": categories})
    return stats, questions


def selected_counts(dataset: str, params: Mapping[str, Any]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """:func:`paper_scale_counts` of the part a run's notebook-00 parameters keep
    (``sample_*`` or ``limit_*``)."""
    return paper_scale_counts(
        dataset,
        int(params.get("sample_conversations") or params.get("limit_conversations") or 0),
        int(params.get("sample_questions") or params.get("limit_questions") or 0),
    )


def profile_note(dataset: str) -> str:
    """Where the paper-scale counts of ``dataset`` come from, in one line."""
    rendered, per_turn, _ = sample_shape(dataset)
    n, mean, questions = TABLE1[dataset][0], TABLE1[dataset][4], TABLE2[dataset][0]
    return (
        f"{dataset}: paper-scale counts (paper Tables 1-2: {n:,} conversations of "
        f"{mean:,} tokens, {questions:,} questions; rendering x{rendered:.3f} and "
        f"{per_turn:.1f} tokens per turn measured on the bundled sample)"
    )
