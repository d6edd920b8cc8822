"""The per-user vector store: one FAISS HNSW index per user (build, save, load with checks,
search, exact search), behind the interface a second backend (pgvector) implements.

The paper stored facts in pgvector with an HNSW index (``m = 16``, ``ef_construction = 64``,
cosine); here each user gets a FAISS ``IndexHNSWFlat`` with the same graph settings, inner
product on L2-normalised vectors (which is cosine), wrapped in an ``IndexIDMap2`` so every vector
carries a 63-bit id derived from its ``fact_id``. One index per user is what makes users
isolated: a question is only ever searched against its own user's index.

On disk, ``memory/index/<user>.faiss`` holds the index and ``memory/index/<user>.parquet`` the
fact table, one row per vector in id order (schema in docs/architecture.md). Loading checks that
the two agree (count, ids, user, dimensions) and names the user when they do not, so a stale or
swapped file is an error rather than wrong answers.
"""

from __future__ import annotations

import contextlib
import json
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import faiss
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from memcost.io import atomic_path
from memcost.text import stable_hash

# The paper's HNSW settings (§3.1) and the vector shape check: one definition, the stores'.
from memcost.vectorstore.base import EF_CONSTRUCTION, EF_SEARCH, HNSW_M, as_matrix

SINGLE_THREAD_BELOW = 16  # queries per search call below which FAISS runs on one thread
_META_KEY = b"memcost.index"
_SAFE_STEM = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")


@contextlib.contextmanager
def omp_threads(n: int | None) -> Iterator[None]:
    """Run FAISS with ``n`` OpenMP threads inside the block (``None``: leave it alone).

    FAISS parallelises a search over its queries. For one query there is nothing to share,
    yet waking the thread team costs more than the search: inside a Jupyter kernel on two
    cores a 20-nearest search over a few dozen facts took ~8 ms with two threads and ~0.01 ms
    with one. Single queries (what a user waits for) therefore run on one thread.
    """
    if n is None:
        yield
        return
    before = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(n)
    try:
        yield
    finally:
        faiss.omp_set_num_threads(before)


class IndexMismatch(ValueError):
    """An index file and its fact table disagree (or one is missing)."""


def user_stem(user: str) -> str:
    """A file name for a user's files: the id itself when it is file-name safe (every benchmark
    id is), otherwise a cleaned id plus a short hash so two ids never share a name."""
    if _SAFE_STEM.match(user):
        return user
    cleaned = re.sub(r"[^A-Za-z0-9._-]+", "_", user).strip("._-")[:60] or "user"
    return f"{cleaned}-{stable_hash(user, bits=32):08x}"


def fact_key(fact_id: str) -> int:
    """The int64 id a fact's vector carries in FAISS (non-negative: -1 means "no result").

    Hashing the whole ``fact_id`` (``<user>:f<n>``) makes ids differ between users, so an
    index that was copied to another user's name fails the id check on load.
    """
    return stable_hash(fact_id, bits=64) & ((1 << 63) - 1)


def index_paths(folder: str | Path, user: str) -> tuple[Path, Path]:
    """``(<folder>/<stem>.faiss, <folder>/<stem>.parquet)`` for ``user``."""
    stem = user_stem(user)
    folder = Path(folder)
    return folder / f"{stem}.faiss", folder / f"{stem}.parquet"


def build_hnsw(
    vectors: np.ndarray,
    ids: np.ndarray,
    *,
    m: int = HNSW_M,
    ef_construction: int = EF_CONSTRUCTION,
) -> faiss.IndexIDMap2:
    """An HNSW index over ``vectors`` (rows L2-normalised: inner product = cosine)."""
    x = as_matrix(vectors)
    keys = np.ascontiguousarray(ids, dtype=np.int64)
    if len(keys) != len(x):
        raise ValueError(f"{len(x)} vectors but {len(keys)} ids")
    hnsw = faiss.IndexHNSWFlat(x.shape[1], int(m), faiss.METRIC_INNER_PRODUCT)
    hnsw.hnsw.efConstruction = int(ef_construction)
    index = faiss.IndexIDMap2(hnsw)
    if len(x):
        index.add_with_ids(x, keys)
    return index


def exact_search(vectors: np.ndarray, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Exact top-``k`` by inner product (``IndexFlatIP``): ``(scores, row indices)``, ``-1``
    where there are fewer than ``k`` vectors. The reference HNSW is measured against."""
    x = as_matrix(vectors)
    q = as_matrix(queries, x.shape[1])
    flat = faiss.IndexFlatIP(x.shape[1])
    if len(x):
        flat.add(x)
    with omp_threads(1 if len(q) < SINGLE_THREAD_BELOW else None):
        return flat.search(q, int(k))


def recall_at_k(approx_scores: np.ndarray, exact_scores: np.ndarray, *, eps: float = 1e-5) -> float:
    """Share of the exact top-k that the approximate search found, counting ties as found.

    Both arrays are ``(queries, k)`` of scores, best first, padded with -inf/-3.4e38 where a
    search returned fewer results. A returned vector counts when its score reaches the exact
    k-th score (minus ``eps``): with many equal scores, which of the tied vectors comes back is
    arbitrary, and an id-set comparison would call a correct answer a miss. An HNSW Flat index
    returns exact scores for what it finds, so no second lookup is needed.
    """
    approx = np.asarray(approx_scores, dtype=np.float64)
    exact = np.asarray(exact_scores, dtype=np.float64)
    found = total = 0
    for a_row, e_row in zip(approx, exact, strict=True):
        valid = e_row[e_row > -1e30]
        if not len(valid):
            continue
        kth = valid[-1]
        found += int(min(len(valid), np.sum(a_row[a_row > -1e30] >= kth - eps)))
        total += len(valid)
    return found / total if total else 1.0


@dataclass
class UserIndex:
    """A user's loaded (or just built) index and its fact table (row ``i`` = index id ``i``)."""

    user: str
    index: faiss.IndexIDMap2
    table: pd.DataFrame
    meta: dict[str, Any] = field(default_factory=dict)
    _row_of: dict[int, int] = field(default_factory=dict, repr=False)
    _ef: int | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self._row_of = {int(k): i for i, k in enumerate(self.table["faiss_id"].tolist())}

    @property
    def dims(self) -> int:
        return int(self.index.d)

    def __len__(self) -> int:
        return int(self.index.ntotal)

    def _set_ef(self, ef_search: int) -> None:
        if self._ef != ef_search:
            faiss.downcast_index(self.index.index).hnsw.efSearch = int(ef_search)
            self._ef = int(ef_search)

    def search(
        self, queries: np.ndarray, k: int, *, ef_search: int = EF_SEARCH
    ) -> tuple[np.ndarray, np.ndarray]:
        """HNSW top-``k``: ``(scores, table rows)``, each ``(queries, k)``; rows are ``-1``
        (scores ``-inf``) where the user has fewer than ``k`` facts."""
        q = as_matrix(queries, self.dims)
        self._set_ef(max(int(ef_search), 1))
        if len(self) == 0 or k <= 0:
            shape = (len(q), max(int(k), 0))
            return np.full(shape, -np.inf, np.float32), np.full(shape, -1, np.int64)
        with omp_threads(1 if len(q) < SINGLE_THREAD_BELOW else None):
            scores, keys = self.index.search(q, int(k))
        rows = np.vectorize(lambda key: self._row_of.get(int(key), -1), otypes=[np.int64])(keys)
        scores = np.where(rows >= 0, scores, -np.inf).astype(np.float32)
        return scores, rows

    def vectors(self) -> np.ndarray:
        """The stored vectors in table order (HNSW Flat keeps them uncompressed)."""
        if len(self) == 0:
            return np.zeros((0, self.dims), np.float32)
        return faiss.downcast_index(self.index.index).storage.reconstruct_n(0, len(self))

    def exact_search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Exact top-``k`` over this user's vectors: ``(scores, table rows)``."""
        scores, rows = exact_search(self.vectors(), queries, k)
        scores = np.where(rows >= 0, scores, -np.inf).astype(np.float32)
        return scores, rows

    def timed_search(
        self, query: np.ndarray, k: int, *, ef_search: int = EF_SEARCH
    ) -> tuple[np.ndarray, np.ndarray, float]:
        """:meth:`search` for one query, with its wall time in seconds (what a user waits)."""
        self._set_ef(max(int(ef_search), 1))
        t0 = time.perf_counter()
        scores, rows = self.search(query, k, ef_search=ef_search)
        return scores[0], rows[0], time.perf_counter() - t0


def save_user_index(
    folder: str | Path,
    user: str,
    vectors: np.ndarray,
    table: pd.DataFrame,
    *,
    m: int = HNSW_M,
    ef_construction: int = EF_CONSTRUCTION,
    dims: int | None = None,
    extra_meta: dict[str, Any] | None = None,
    schema: pa.Schema | None = None,
) -> UserIndex:
    """Build ``user``'s index from ``vectors`` (row ``i`` = ``table`` row ``i``) and write both
    files atomically. ``table`` needs ``fact_id`` and ``conversation_id`` columns; ``index_id``
    and ``faiss_id`` are added. ``dims`` is needed only when there are no vectors; ``schema``
    (the table's columns) keeps column types when there are no rows to infer them from."""
    x = as_matrix(vectors) if len(vectors) else np.zeros((0, dims or 0), np.float32)
    if len(x) != len(table):
        raise ValueError(f"user {user!r}: {len(x)} vectors for {len(table)} facts")
    if x.shape[1] == 0:
        raise ValueError(f"user {user!r}: unknown vector dimensions (pass dims for no facts)")
    table = table.reset_index(drop=True).copy()
    if len(table) and (table["conversation_id"] != user).any():
        raise ValueError(f"user {user!r}: the table holds facts of other users")
    table["index_id"] = np.arange(len(table), dtype=np.int64)
    table["faiss_id"] = np.array([fact_key(f) for f in table["fact_id"]], dtype=np.int64)
    index = build_hnsw(x, table["faiss_id"].to_numpy(), m=m, ef_construction=ef_construction)
    meta = {
        "user": user,
        "dims": int(x.shape[1]),
        "count": len(table),
        "hnsw_m": int(m),
        "ef_construction": int(ef_construction),
        "metric": "inner_product",
        **(extra_meta or {}),
    }
    faiss_path, table_path = index_paths(folder, user)
    faiss_path.parent.mkdir(parents=True, exist_ok=True)
    if schema is not None:
        schema = schema.append(pa.field("index_id", pa.int64()))
        schema = schema.append(pa.field("faiss_id", pa.int64()))
        table = table[schema.names]
    arrow = pa.Table.from_pandas(table, schema=schema, preserve_index=False)
    arrow = arrow.replace_schema_metadata(
        {**(arrow.schema.metadata or {}), _META_KEY: json.dumps(meta).encode()}
    )
    with atomic_path(table_path) as tmp:
        pq.write_table(arrow, tmp)
    with atomic_path(faiss_path) as tmp:
        faiss.write_index(index, str(tmp))
    return UserIndex(user, index, table, meta)


def load_user_index(folder: str | Path, user: str) -> UserIndex:
    """Read ``user``'s index and fact table and check that they belong together.

    Raises :class:`IndexMismatch`, naming the user, when a file is missing or when the count,
    the ids, the owner or the dimensions disagree.
    """
    faiss_path, table_path = index_paths(folder, user)
    redo = (
        f"rebuild it with notebooks/01_extract_facts.ipynb (delete memory/users/"
        f"{user_stem(user)}/ so the notebook builds this user again)"
    )
    missing = [p.name for p in (faiss_path, table_path) if not p.is_file()]
    if missing:
        raise IndexMismatch(f"memory index of user {user!r}: missing {missing} in {folder}; {redo}")
    arrow = pq.read_table(table_path)
    raw_meta = (arrow.schema.metadata or {}).get(_META_KEY)
    meta = json.loads(raw_meta) if raw_meta else {}
    table = arrow.to_pandas()
    index = faiss.read_index(str(faiss_path))

    def fail(what: str) -> IndexMismatch:
        return IndexMismatch(
            f"memory index of user {user!r} does not match its fact table: {what} "
            f"({faiss_path.name} vs {table_path.name}); {redo}"
        )

    if not isinstance(index, faiss.IndexIDMap2):
        raise fail(f"{faiss_path.name} is a {type(index).__name__}, not an id-mapped HNSW index")
    if meta.get("user") not in (None, user):
        raise fail(f"the table belongs to user {meta.get('user')!r}")
    if len(table) and (table["conversation_id"] != user).any():
        raise fail("the table holds facts of other users")
    if int(index.ntotal) != len(table):
        raise fail(f"the index holds {index.ntotal} vectors, the table {len(table)} facts")
    if "dims" in meta and int(meta["dims"]) != int(index.d):
        raise fail(f"the index has {index.d} dimensions, the table was written for {meta['dims']}")
    ids = faiss.vector_to_array(index.id_map).astype(np.int64) if index.ntotal else np.zeros(0)
    expected = np.array([fact_key(f) for f in table["fact_id"]], dtype=np.int64)
    if not np.array_equal(ids, expected) or not np.array_equal(
        table["faiss_id"].to_numpy(np.int64), expected
    ):
        raise fail("the ids in the index are not the table's facts, in table order")
    return UserIndex(user, index, table, meta)


# --- The store interface ------------------------------------------------------------------------


class VectorStore(Protocol):
    """What the memory needs from a vector store, per user: the FAISS files here, a pgvector
    table with an HNSW index (the paper's store) as a second backend. Scores are cosine
    similarities (inner products of L2-normalised vectors); rows index the user's fact table."""

    def build(self, user: str, vectors: np.ndarray, table: pd.DataFrame, *, dims: int | None = None,
              extra_meta: dict[str, Any] | None = None, schema: pa.Schema | None = None) -> None:
        """Store ``user``'s active facts (row ``i`` of ``table`` has vector ``i``)."""

    def load(self, user: str) -> UserIndex:
        """``user``'s index and fact table, checked to belong together."""

    def search(self, user: str, queries: np.ndarray, k: int, *,
               ef_search: int = EF_SEARCH) -> tuple[np.ndarray, np.ndarray]:
        """Approximate top-``k``: ``(scores, table rows)``."""

    def exact_search(self, user: str, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Exact top-``k``: the reference the approximate search is measured against."""

    def count(self, user: str) -> int:
        """How many facts ``user`` has in the store."""


class FaissStore:
    """:class:`VectorStore` over ``<folder>/<user>.faiss`` + ``<user>.parquet`` files; each
    user's index is loaded (and checked) once."""

    def __init__(self, folder: str | Path, *, m: int = HNSW_M,
                 ef_construction: int = EF_CONSTRUCTION):
        self.folder = Path(folder)
        self.m, self.ef_construction = m, ef_construction
        self._loaded: dict[str, UserIndex] = {}

    def build(self, user: str, vectors: np.ndarray, table: pd.DataFrame, *, dims: int | None = None,
              extra_meta: dict[str, Any] | None = None, schema: pa.Schema | None = None) -> None:
        self._loaded[user] = save_user_index(
            self.folder, user, vectors, table, m=self.m, ef_construction=self.ef_construction,
            dims=dims, extra_meta=extra_meta, schema=schema)

    def load(self, user: str) -> UserIndex:
        if user not in self._loaded:
            self._loaded[user] = load_user_index(self.folder, user)
        return self._loaded[user]

    def search(self, user: str, queries: np.ndarray, k: int, *,
               ef_search: int = EF_SEARCH) -> tuple[np.ndarray, np.ndarray]:
        return self.load(user).search(queries, k, ef_search=ef_search)

    def exact_search(self, user: str, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        return self.load(user).exact_search(queries, k)

    def count(self, user: str) -> int:
        return len(self.load(user))
