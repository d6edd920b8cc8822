"""Searching the paper's memory (paper §3.1): each question embedded and searched in its own user's
facts only (docs/architecture.md, "Search")."""

from __future__ import annotations

import atexit
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from memcost.llm import LLMClient
from memcost.memory.base import rows_by_user
from memcost.memory.facts import read_done, read_facts, read_incomplete
from memcost.memory.faiss_store import FaissStore, recall_at_k
from memcost.memory.vectors import EF_CONSTRUCTION, EF_SEARCH, HNSW_M, IndexMismatch, VectorStore
from memcost.paper import EMBEDDING_MODEL, PAPER_MEMORY
from memcost.paths import DatasetPaths, RunPaths
from memcost.plugins import plugins

TOP_K = 20  # §3.1: facts retrieved per question
SYSTEM = PAPER_MEMORY


@dataclass
class UserFacts:
    """One user's active facts (``facts.parquet`` order) and their vectors; results are ``(scores,
    table rows)``, ``-1`` where short."""

    user: str
    store: VectorStore
    table: pd.DataFrame
    _row_of: dict[str, int] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self.table = self.table.reset_index(drop=True)
        self._row_of = {f: i for i, f in enumerate(self.table["fact_id"].tolist())}
        stored = self.store.count(self.user)
        if stored != len(self.table):
            raise IndexMismatch(
                f"memory of user {self.user!r}: the {self.store.name} store holds {stored} facts, "
                f"facts.parquet {len(self.table)} active ones; rebuild it with "
                "notebooks/01_extract_facts.ipynb"
            )

    @property
    def dims(self) -> int:
        return self.store.dims

    def __len__(self) -> int:
        return len(self.table)

    def _rows(self, fact_ids: np.ndarray, scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        rows = np.array(
            [[self._row_of.get(f, -1) if f else -1 for f in r] for r in fact_ids], dtype=np.int64
        ).reshape(fact_ids.shape)
        return np.where(rows >= 0, scores, -np.inf).astype(np.float32), rows

    def search(
        self, queries: np.ndarray, k: int, *, ef_search: int = EF_SEARCH
    ) -> tuple[np.ndarray, np.ndarray]:
        res = self.store.search(self.user, queries, k, ef_search=ef_search)
        return self._rows(res.fact_ids, res.scores)

    def exact_search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        res = self.store.exact_search(self.user, queries, k)
        return self._rows(res.fact_ids, res.scores)

    def timed_search(
        self, query: np.ndarray, k: int, *, ef_search: int = EF_SEARCH
    ) -> tuple[np.ndarray, np.ndarray, float]:
        """:meth:`search` for one query, with its wall time (what a user waits)."""
        t0 = time.perf_counter()
        scores, rows = self.search(query, k, ef_search=ef_search)
        return scores[0], rows[0], time.perf_counter() - t0

    def vectors(self) -> np.ndarray:
        if not len(self.table):
            return np.zeros((0, self.dims), np.float32)
        ids, x = self.store.vectors(self.user)
        where = {f: i for i, f in enumerate(ids)}
        return x[[where[f] for f in self.table["fact_id"]]]


def _active_groups(facts: pd.DataFrame) -> tuple[dict[str, pd.DataFrame], pd.DataFrame]:
    active = facts.loc[facts["status"] == "active"]
    return ({str(u): g for u, g in active.groupby("conversation_id", sort=False)}, active.iloc[0:0])


class MemoryStore:
    """The dataset's memories in the run's vector store, each loaded once; an unbuilt user, or facts
    embedded by another model than the questions, is an error."""

    def __init__(self, ds: DatasetPaths, store: VectorStore, *, embedding_model: str | None = None):
        self.ds = ds
        self.vector_store = store
        self.embedding_model = embedding_model
        # every user's fact rows, grouped once: a user's own scan of the whole table, for each
        # of 500 users, made notebook 02 quadratic in the dataset's size
        self._groups: tuple[dict[str, pd.DataFrame], pd.DataFrame] | None = None
        self._loaded: dict[str, UserFacts] = {}
        self._vectors: dict[str, np.ndarray] = {}

    def _check_model(self, user: str) -> None:
        marker = read_done(self.ds, user) or read_incomplete(self.ds, user) or {}
        built_with = marker.get("embedding_model")
        if self.embedding_model and built_with and built_with != self.embedding_model:
            raise ValueError(
                f"memory of user {user!r} was embedded with {built_with}, but questions are "
                f"to be embedded with {self.embedding_model}: use the same embedding_model "
                "in notebooks 01 and 02"
            )

    def get(self, user: str) -> UserFacts:
        if user not in self._loaded:
            if not self.vector_store.is_built(user):
                raise IndexMismatch(
                    f"memory of user {user!r} is not in the {self.vector_store.name} store; "
                    "run notebooks/01_extract_facts.ipynb with the same vector_store settings"
                )
            self._check_model(user)
            if self._groups is None:
                self._groups = _active_groups(read_facts(self.ds))
            groups, empty = self._groups
            table = groups.get(user, empty).reset_index(drop=True)
            self._loaded[user] = UserFacts(user, self.vector_store, table)
        return self._loaded[user]

    def vectors(self, user: str) -> np.ndarray:
        if user not in self._vectors:
            self._vectors[user] = self.get(user).vectors()
        return self._vectors[user]


@dataclass(frozen=True)
class Retrieved:
    fact_ids: tuple[str, ...]
    scores: tuple[float, ...]
    facts: pd.DataFrame  # the user's fact rows, best first
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
    system: str = SYSTEM,
) -> np.ndarray:
    """One embedding call per question, tagged with it (a read in the cost tables; fact embeddings
    are writes)."""
    groups = [
        (
            [str(q)],
            {
                "dataset": dataset,
                "conversation_id": str(c),
                "question_id": str(qid),
                "system": system,
            },
        )
        for q, c, qid in zip(
            questions["question"],
            questions["conversation_id"],
            questions["question_id"],
            strict=True,
        )
    ]
    if not groups:
        return np.zeros((0, 0), np.float32)
    return np.vstack(client.embed_groups(groups, model=model, desc="embed questions"))


def retrieve(
    store: MemoryStore,
    user: str,
    vector: np.ndarray,
    *,
    top_k: int = TOP_K,
    ef_search: int = EF_SEARCH,
    compare_exact: bool = True,
) -> Retrieved:
    """``user``'s ``top_k`` facts most similar to ``vector``."""
    idx = store.get(user)
    scores, rows, latency = idx.timed_search(vector, top_k, ef_search=ef_search)
    keep = rows >= 0
    facts = idx.table.iloc[rows[keep]].reset_index(drop=True)
    recall = None
    if compare_exact and len(idx):
        exact_scores, _ = idx.exact_search(vector, top_k)
        recall = recall_at_k(scores[None, :], exact_scores)
    return Retrieved(
        fact_ids=tuple(facts["fact_id"].tolist()),
        scores=tuple(round(float(s), 6) for s in scores[keep]),
        facts=facts,
        latency_s=latency,
        index_recall=recall,
    )


def search_quality(
    store: MemoryStore,
    users: Sequence[str],
    vectors: np.ndarray,
    *,
    k: int,
    ef_values: Sequence[int],
) -> pd.DataFrame:
    """Per ``ef_search``: questions, facts returned of ``k``, recall@k against exact search (each
    user's questions searched together)."""
    by_user = rows_by_user(users)
    order = [i for rows in by_user.values() for i in rows]
    matrix = vectors.reshape(len(users), -1) if len(users) else vectors
    exact = np.vstack([store.get(u).exact_search(matrix[at], k)[0] for u, at in by_user.items()])
    want = np.array([min(k, len(store.get(users[i]))) for i in order])
    rows: list[dict[str, Any]] = []
    for ef in ef_values:
        found = [store.get(u).search(matrix[at], k, ef_search=ef) for u, at in by_user.items()]
        approx = np.vstack([scores for scores, _ in found]) if found else np.zeros((0, k))
        got = np.concatenate([(r >= 0).sum(axis=1) for _, r in found]) if found else np.zeros(0)
        rows.append(
            {
                "ef_search": int(ef),
                "questions": len(got),
                "k": k,
                "returned_mean": round(float(got.mean()), 2) if len(got) else None,
                "returned_min": int(got.min()) if len(got) else None,
                "all_returned": round(float((got >= want).mean()), 3) if len(got) else None,
                f"recall@{k}": round(recall_at_k(approx, exact), 3) if len(got) else None,
            }
        )
    return pd.DataFrame(rows)


def store_class(name: str) -> type[VectorStore]:
    stores = {"faiss": FaissStore, **{k: v for p in plugins() for k, v in p.vector_stores.items()}}
    if name not in stores:
        raise ValueError(f"vector_store must be one of {', '.join(stores)}, not {name!r}")
    return stores[name]


def open_store(
    vector_store: str,
    dims: int,
    run: RunPaths,
    dataset: str,
    *,
    m: int = HNSW_M,
    ef_construction: int = EF_CONSTRUCTION,
    **options: Any,
) -> VectorStore:
    """``dataset``'s store of facts in ``run`` (``options``: the ``pgvector_*`` parameters without
    the prefix), closed when the process ends."""
    cls = store_class(vector_store)
    store = cls.open(
        dims, run=run, dataset=dataset, m=m, ef_construction=ef_construction, **options
    )
    atexit.register(store.close)
    return store
