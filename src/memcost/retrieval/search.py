"""Answering from memory, step 1 (study §2; paper §3.1): embed the question, search its user.

Each question is embedded (one embedding call, tagged with the question so the cost tables
count it as a read) and searched in its own user's HNSW index only, so another user's facts can
never come back. Every search is repeated exactly to measure what HNSW misses.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from memcost.answers import system_name
from memcost.llm import LLMClient
from memcost.memory import embed_groups
from memcost.memory import store as vector_store
from memcost.memory.facts import index_dir
from memcost.models import EMBEDDING_MODEL
from memcost.paths import DatasetPaths

TOP_K = 20  # §3.1: facts retrieved per question
SYSTEM = system_name("memory")


class MemoryStore:
    """The per-user indexes of one dataset, loaded (and checked) once each."""

    def __init__(self, ds: DatasetPaths, *, embedding_model: str | None = None):
        self.folder = index_dir(ds)
        self.embedding_model = embedding_model
        self.store = vector_store.FaissStore(self.folder)
        self._checked: set[str] = set()
        self._vectors: dict[str, np.ndarray] = {}

    def get(self, user: str) -> vector_store.UserIndex:
        """``user``'s index; :class:`memcost.memory.store.IndexMismatch` names the user when its
        files are missing or disagree, and a different embedding model is an error too (a
        question embedded by one model cannot be compared with facts embedded by another)."""
        loaded = self.store.load(user)
        if user not in self._checked:
            built_with = loaded.meta.get("embedding_model")
            if self.embedding_model and built_with and built_with != self.embedding_model:
                raise ValueError(
                    f"memory of user {user!r} was embedded with {built_with}, but questions are "
                    f"to be embedded with {self.embedding_model}: use the same embedding_model "
                    "in notebooks 01 and 02"
                )
            self._checked.add(user)
        return loaded

    def vectors(self, user: str) -> np.ndarray:
        if user not in self._vectors:
            self._vectors[user] = self.get(user).vectors()
        return self._vectors[user]


@dataclass(frozen=True)
class Retrieved:
    """What the search returned for one question."""

    fact_ids: tuple[str, ...]
    scores: tuple[float, ...]
    facts: pd.DataFrame  # the index table's rows, best first
    latency_s: float  # the HNSW search alone
    index_recall: float | None  # share of the exact top-k that HNSW found (ties count)

    @property
    def texts(self) -> list[str]:
        return self.facts["text"].tolist()


def embed_questions(
    client: LLMClient,
    questions: pd.DataFrame,
    *,
    dataset: str,
    model: str = EMBEDDING_MODEL,
) -> np.ndarray:
    """One embedding call per question, tagged with its ``question_id`` and ``system``: the
    cost tables count these as reads, and fact embeddings (no question) as writes."""
    groups = [
        ([str(q)], {"dataset": dataset, "conversation_id": str(c), "question_id": str(qid),
                    "system": SYSTEM})
        for q, c, qid in zip(questions["question"], questions["conversation_id"],
                             questions["question_id"], strict=True)
    ]
    if not groups:
        return np.zeros((0, 0), np.float32)
    return np.vstack(embed_groups(client, groups, model=model, desc="embed questions"))


def retrieve(
    store: MemoryStore,
    user: str,
    vector: np.ndarray,
    *,
    top_k: int = TOP_K,
    ef_search: int = vector_store.EF_SEARCH,
    compare_exact: bool = True,
) -> Retrieved:
    """The ``top_k`` facts of ``user`` most similar to ``vector``: only that user's index is
    searched, so another user's facts can never come back."""
    idx = store.get(user)
    scores, rows, latency = idx.timed_search(vector, top_k, ef_search=ef_search)
    keep = rows >= 0
    facts = idx.table.iloc[rows[keep]].reset_index(drop=True)
    recall = None
    if compare_exact and len(idx):
        exact_scores, _ = vector_store.exact_search(store.vectors(user), vector, top_k)
        recall = vector_store.recall_at_k(scores[None, :], exact_scores)
    return Retrieved(
        fact_ids=tuple(facts["fact_id"].tolist()),
        scores=tuple(round(float(s), 6) for s in scores[keep]),
        facts=facts,
        latency_s=latency,
        index_recall=recall,
    )
