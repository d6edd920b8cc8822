"""The datasets' own time structure, read from a run's prepared files (notebook 00's hand-over,
through :mod:`memcost.data`): per user, the gaps between dated sessions (LoCoMo session times;
LongMemEval haystack session dates, then the question date) and the history length."""

from __future__ import annotations

import numpy as np

from memcost.data import read_conversation_stats, read_conversations, read_questions
from memcost.paths import RunPaths
from memcost.today.arrivals import dataset_gaps


def run_dataset_time(run: RunPaths) -> tuple[dict[str, dict], dict[str, float], list[str]]:
    """``(gaps per dataset and user, median history tokens per dataset, notes)`` for every
    dataset of ``run`` that notebook 00 prepared; a dataset without dated sessions is noted
    and left out."""
    gaps, contexts, notes = {}, {}, []
    for ds in run.datasets():
        if not ds.conversations.is_file():
            notes.append(f"{ds.name}: no prepared conversations (notebook 00 has not run)")
            continue
        conversations = read_conversations(ds)
        questions = read_questions(ds) if ds.questions.is_file() else None
        users = dataset_gaps(conversations, questions)
        if not any(len(g) for g in users.values()):
            notes.append(f"{ds.name}: no user has two dated sessions")
            continue
        gaps[ds.name] = users
        try:
            stats = read_conversation_stats(ds)
            contexts[ds.name] = float(np.median(stats["history_tokens"]))
        except FileNotFoundError:
            notes.append(f"{ds.name}: no conversation_stats.parquet; history length unknown")
            gaps.pop(ds.name)
    return gaps, contexts, notes
