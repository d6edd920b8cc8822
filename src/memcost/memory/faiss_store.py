"""The FAISS store: one HNSW index per user (paper §3.1's settings), as checked file pairs or in
memory."""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import faiss
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from memcost.io import atomic_path
from memcost.memory.vectors import (
    EF_CONSTRUCTION,
    EF_SEARCH,
    HNSW_M,
    IndexMismatch,
    SearchResult,
    VectorStore,
    as_matrix,
    check_facts,
)
from memcost.paths import DatasetPaths
from memcost.text import stable_hash

SINGLE_THREAD_BELOW = 16  # queries per search call below which FAISS runs on one thread
_META_KEY = b"memcost.index"
_SAFE_STEM = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")


@contextlib.contextmanager
def omp_threads(n: int | None) -> Iterator[None]:
    """FAISS with ``n`` OpenMP threads inside the block: a single query on two threads took ~8 ms in
    a kernel, on one ~0.01 ms."""
    if n is None:
        yield
        return
    before = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(n)
    try:
        yield
    finally:
        faiss.omp_set_num_threads(before)


def user_stem(user: str) -> str:
    """The user id as a file name when safe, else cleaned plus a short hash."""
    if _SAFE_STEM.match(user):
        return user
    cleaned = re.sub(r"[^A-Za-z0-9._-]+", "_", user).strip("._-")[:60] or "user"
    return f"{cleaned}-{stable_hash(user, bits=32):08x}"


def fact_key(fact_id: str) -> int:
    """The int64 id a fact's vector carries (non-negative: -1 means none), from the whole
    ``<user>:f<n>``, so an index copied to another user fails the check."""
    return stable_hash(fact_id, bits=64) & ((1 << 63) - 1)


def index_paths(folder: str | Path, user: str) -> tuple[Path, Path]:
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


def flat_index(vectors: np.ndarray) -> faiss.IndexFlatIP:
    x = as_matrix(vectors)
    flat = faiss.IndexFlatIP(x.shape[1])
    if len(x):
        flat.add(x)
    return flat


def exact_search(
    vectors: np.ndarray, queries: np.ndarray, k: int, *, flat: faiss.IndexFlatIP | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Exact top-``k`` by inner product: ``(scores, row indices)``, ``-1`` past the vectors
    (``flat``: a kept :func:`flat_index`)."""
    flat = flat if flat is not None else flat_index(vectors)
    q = as_matrix(queries, flat.d)
    with omp_threads(1 if len(q) < SINGLE_THREAD_BELOW else None):
        return flat.search(q, int(k))


def recall_at_k(approx_scores: np.ndarray, exact_scores: np.ndarray, *, eps: float = 1e-5) -> float:
    """Share of the exact top-k the approximate search found, a tie counting as found (scores at or
    above the exact k-th, minus ``eps``)."""
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
class UserFiles:
    fact_ids: list[str]
    vectors: np.ndarray  # row i = fact_ids[i], the order the index was built in
    index: faiss.IndexIDMap2
    meta: dict[str, Any]


def write_user_files(
    folder: str | Path,
    user: str,
    fact_ids: Sequence[str],
    vectors: np.ndarray,
    *,
    m: int = HNSW_M,
    ef_construction: int = EF_CONSTRUCTION,
) -> UserFiles:
    """Build ``user``'s index and write both files atomically, the fact ids first (a kill between
    leaves files that fail the checks, never a wrong index)."""
    x = as_matrix(vectors)
    keys = np.array([fact_key(f) for f in fact_ids], dtype=np.int64)
    index = build_hnsw(x, keys, m=m, ef_construction=ef_construction)
    meta = {
        "user": user,
        "dims": int(x.shape[1]),
        "count": len(fact_ids),
        "hnsw_m": int(m),
        "ef_construction": int(ef_construction),
        "metric": "inner_product",
    }
    faiss_path, table_path = index_paths(folder, user)
    faiss_path.parent.mkdir(parents=True, exist_ok=True)
    table = pa.table(
        {
            "fact_id": pa.array(list(fact_ids), pa.string()),
            "index_id": pa.array(np.arange(len(keys)), pa.int64()),
            "faiss_id": pa.array(keys, pa.int64()),
        }
    )
    table = table.replace_schema_metadata({_META_KEY: json.dumps(meta).encode()})
    with atomic_path(table_path) as tmp:
        pq.write_table(table, tmp)
    with atomic_path(faiss_path) as tmp:
        faiss.write_index(index, str(tmp))
    return UserFiles(list(fact_ids), x, index, meta)


def stored_users(folder: str | Path) -> list[str]:
    folder = Path(folder)
    users = {read_meta(p).get("user") for p in folder.glob("*.parquet")} if folder.is_dir() else ()
    return sorted(u for u in users if u and index_paths(folder, u)[0].is_file())


def read_meta(table_path: Path) -> dict[str, Any]:
    raw = (pq.read_schema(table_path).metadata or {}).get(_META_KEY)
    return json.loads(raw) if raw else {}


def read_user_files(folder: str | Path, user: str) -> UserFiles:
    """``user``'s index and fact ids; :class:`IndexMismatch` naming the user when a file is missing
    or they disagree."""
    faiss_path, table_path = index_paths(folder, user)
    redo = (
        f"rebuild it with notebooks/01_extract_facts.ipynb (delete memory/users/"
        f"{user_stem(user)}/ so the notebook builds this user again)"
    )
    missing = [p.name for p in (faiss_path, table_path) if not p.is_file()]
    if missing:
        raise IndexMismatch(f"memory index of user {user!r}: missing {missing} in {folder}; {redo}")
    arrow = pq.read_table(table_path)
    meta = read_meta(table_path)
    index = faiss.read_index(str(faiss_path))

    def fail(what: str) -> IndexMismatch:
        return IndexMismatch(
            f"memory index of user {user!r} does not match its fact ids: {what} "
            f"({faiss_path.name} vs {table_path.name}); {redo}"
        )

    if not isinstance(index, faiss.IndexIDMap2):
        raise fail(f"{faiss_path.name} is a {type(index).__name__}, not an id-mapped HNSW index")
    if meta.get("user") != user:
        raise fail(f"the fact ids belong to user {meta.get('user')!r}")
    fact_ids = [str(f) for f in arrow.column("fact_id").to_pylist()]
    if int(index.ntotal) != len(fact_ids):
        raise fail(f"the index holds {index.ntotal} vectors, the table {len(fact_ids)} facts")
    if "dims" in meta and int(meta["dims"]) != int(index.d):
        raise fail(f"the index has {index.d} dimensions, the table was written for {meta['dims']}")
    ids = faiss.vector_to_array(index.id_map).astype(np.int64) if index.ntotal else np.zeros(0)
    expected = np.array([fact_key(f) for f in fact_ids], dtype=np.int64)
    if not np.array_equal(ids, expected) or not np.array_equal(
        np.asarray(arrow.column("faiss_id").to_pylist(), np.int64).reshape(-1), expected
    ):
        raise fail("the ids in the index are not the table's facts, in table order")
    if index.ntotal:
        vectors = faiss.downcast_index(index.index).storage.reconstruct_n(0, int(index.ntotal))
    else:
        vectors = np.zeros((0, int(index.d)), np.float32)
    return UserFiles(fact_ids, vectors, index, meta)


@dataclass
class _UserIndex:
    fact_ids: list[str]
    vectors: np.ndarray
    index: faiss.IndexIDMap2
    ef: int | None = None
    position: dict[int, int] = field(default_factory=dict)  # faiss id -> row
    flat: faiss.IndexFlatIP | None = None  # the exact index, made on the first exact search

    def __post_init__(self) -> None:
        self.position = {fact_key(f): i for i, f in enumerate(self.fact_ids)}


def index_dir(ds: DatasetPaths) -> Path:
    return ds.memory / "index"


class FaissStore(VectorStore):
    name = "faiss"
    learns_dims = True  # a notebook reading files need not know the embedding's dimensions

    def __init__(self, dims: int, *, folder: str | Path | None = None, **settings: int):
        super().__init__(dims, **settings)
        self.folder = Path(folder) if folder is not None else None
        self._users: dict[str, _UserIndex] = {}

    @classmethod
    def open(cls, dims, *, run, dataset, m, ef_construction, **options):
        folder = index_dir(run.dataset(dataset))
        return cls(dims, folder=folder, m=m, ef_construction=ef_construction)

    def _learn(self, dims: int) -> None:
        if not self.dims and dims:
            self.dims = int(dims)

    def build_user(self, user: str, fact_ids: Sequence[str], vectors: np.ndarray) -> None:
        shape = np.shape(vectors)
        self._learn(shape[1] if len(shape) == 2 else 0)
        if not self.dims:
            raise ValueError(
                f"user {user!r}: unknown vector dimensions (no facts, and the "
                "store was opened without dims)"
            )
        x = check_facts(user, fact_ids, vectors, self.dims)
        if self.folder is not None:
            files = write_user_files(
                self.folder, user, list(fact_ids), x, m=self.m, ef_construction=self.ef_construction
            )
            self._users[user] = _UserIndex(files.fact_ids, files.vectors, files.index)
            return
        keys = np.array([fact_key(f) for f in fact_ids], dtype=np.int64)
        index = build_hnsw(x, keys, m=self.m, ef_construction=self.ef_construction)
        self._users[user] = _UserIndex(list(fact_ids), x, index)

    def is_built(self, user: str) -> bool:
        if user in self._users:
            return True
        if self.folder is None:
            return False
        return all(p.is_file() for p in index_paths(self.folder, user))

    def users(self) -> list[str]:
        on_disk = stored_users(self.folder) if self.folder is not None else []
        return sorted(set(self._users) | set(on_disk))

    def _get(self, user: str) -> _UserIndex:
        if user not in self._users:
            if self.folder is None:
                raise IndexMismatch(f"user {user!r} has no built index in the FAISS store")
            files = read_user_files(self.folder, user)
            self._learn(files.index.d)
            if files.index.d != self.dims:
                raise IndexMismatch(
                    f"memory index of user {user!r} has {files.index.d} dimensions, the "
                    f"questions' embeddings {self.dims}: use the same embedding_model in "
                    "notebooks 01 and 02"
                )
            self._users[user] = _UserIndex(files.fact_ids, files.vectors, files.index)
        return self._users[user]

    def apply(self, user, *, upserts=None, deletes=()) -> None:  # type: ignore[override]
        facts = self._get(user)
        rows = dict(zip(facts.fact_ids, facts.vectors, strict=True))
        missing = [f for f in deletes if f not in rows]
        if missing:
            raise KeyError(f"user {user!r}: no facts {missing[:5]} to delete")
        if upserts is not None:
            ids, vecs = upserts
            x = check_facts(user, ids, vecs, self.dims)
            rows.update(zip(ids, x, strict=True))
        for fact_id in deletes:
            del rows[fact_id]
        ids = list(rows)
        x = np.stack(list(rows.values())) if ids else np.zeros((0, self.dims), np.float32)
        self.build_user(user, ids, x)

    def _result(self, facts: _UserIndex, scores: np.ndarray, keys: np.ndarray) -> SearchResult:
        names = np.array(facts.fact_ids + [""], dtype=object)
        missing = len(facts.fact_ids)
        rows = (
            np.vectorize(lambda key: facts.position.get(int(key), missing), otypes=[np.int64])(keys)
            if keys.size
            else keys.astype(np.int64)
        )
        found = rows < missing
        return SearchResult(np.where(found, scores, -np.inf).astype(np.float32), names[rows])

    def search(
        self, user: str, queries: np.ndarray, k: int, *, ef_search: int = EF_SEARCH
    ) -> SearchResult:
        facts = self._get(user)
        q = as_matrix(queries, self.dims)
        if not facts.fact_ids or k <= 0:
            return SearchResult.empty(len(q), k)
        if facts.ef != ef_search:
            faiss.downcast_index(facts.index.index).hnsw.efSearch = max(int(ef_search), 1)
            facts.ef = ef_search
        with omp_threads(1 if len(q) < SINGLE_THREAD_BELOW else None):
            scores, keys = facts.index.search(q, int(k))
        return self._result(facts, scores, keys)

    def exact_search(self, user: str, queries: np.ndarray, k: int) -> SearchResult:
        facts = self._get(user)
        q = as_matrix(queries, self.dims)
        if not facts.fact_ids or k <= 0:
            return SearchResult.empty(len(q), k)
        if facts.flat is None:
            facts.flat = flat_index(facts.vectors)
        scores, rows = exact_search(facts.vectors, q, k, flat=facts.flat)
        names = np.array(facts.fact_ids + [""], dtype=object)
        rows = np.where(rows >= 0, rows, len(facts.fact_ids))
        found = rows < len(facts.fact_ids)
        return SearchResult(np.where(found, scores, -np.inf).astype(np.float32), names[rows])

    def vectors(self, user: str) -> tuple[list[str], np.ndarray]:
        facts = self._get(user)
        order = np.argsort(np.array(facts.fact_ids, dtype=object), kind="stable")
        return [facts.fact_ids[i] for i in order], facts.vectors[order]

    def count(self, user: str | None = None) -> int:
        if user is not None:
            return len(self._get(user).fact_ids)
        return sum(len(self._get(u).fact_ids) for u in self.users())

    def versions(self) -> dict:
        return {**super().versions(), "faiss": faiss.__version__, "layout": "per_user"}

    def describe(self) -> str:
        where = f"files in {self.folder}" if self.folder is not None else "in memory"
        return f"FAISS {faiss.__version__}: one IndexHNSWFlat per user ({where})"
