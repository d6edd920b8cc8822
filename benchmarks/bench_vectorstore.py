"""Benchmark of the vector stores: FAISS per user against pgvector, shared table and per user.

The paper kept its facts in PostgreSQL with pgvector's HNSW index. In the usual production
layout all users share one table and a question filters on ``user_id``; before pgvector 0.8's
iterative scans (and with ``hnsw.iterative_scan = off``, still its default) the filter runs
after the index scan, which yields about ``hnsw.ef_search`` candidates from every user. This
script measures what that does at the paper's settings (``m = 16``, ``ef_construction = 64``,
cosine, ``k = 20``) for:

- ``faiss``: one FAISS ``IndexHNSWFlat`` per user (:mod:`memcost.memory.faiss_store`, the
  default store);
- ``pg-shared``: one pgvector table, one HNSW index, ``WHERE user_id = ...``;
- ``pg-shared-planner``: the same table with the planner free to choose its plan (the other
  stores force the HNSW index): as in production, it may prefer an exact scan and sort;
- ``pg-shared-iter``: the same with ``hnsw.iterative_scan = relaxed_order`` (pgvector >= 0.8);
- ``pg-per-user``: one table and HNSW index per user;

at three sizes: ``sample`` (3 users x 120 facts, the bundled samples' scale), ``paper`` (500
users x 206 facts = 103,000, the paper's 103,183 facts for 500 users) and ``tenx`` (5,000 users
x 206 = 1,030,000: more users of the same size, as a shared database grows). For each store and
``ef_search`` in 10..1000 (pgvector's maximum): facts returned per query against ``k = 20``
(mean, minimum, share of queries with all 20), recall@20 against exact search within the user
(ties counted as found), p50 / p95 latency of one query, and the build time. Then, on one shared
table, how returned count and recall depend on the user's share of the table.

Vectors: random unit vectors with topic structure, not the offline hashing embedder. Hashing
vectors of different facts are nearly orthogonal (README), so HNSW neighbourhoods carry no
meaning; real embeddings cluster by topic, and every user talks about the same topics (work,
family, hobbies), which is what makes one user's facts a thin slice of every neighbourhood in
a shared index. Each fact is a topic centre (64 topics shared by all users) plus noise
(cosine ~0.7 to its centre); each query is a topic centre plus noise for a random user. 256
dimensions instead of 1,536 keep the builds within minutes on two cores; the filtering effect
depends on ``ef_search`` and the user's share, not on the dimension.

Run: ``.venv/bin/python benchmarks/bench_vectorstore.py`` (what ``make bench`` runs: the
``sample`` size and ``small``, 50 users x 206 facts, 100 queries, a 10,000-fact share sweep;
about a minute), ``--full`` for the paper size and a 50,000-fact sweep (about ten minutes), or
``--sizes sample small paper tenx [--queries 200] [--dims 256]`` by hand (``tenx`` takes about
25 minutes). The PostgreSQL server is a private one in a temporary directory (or ``--dsn``),
removed at the end.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from memcost.memory import faiss_store as index
from memcost.memory.faiss_store import FaissStore
from memcost.memory.vectors import SearchResult, VectorStore
from memcost_pgvector.store import PgServer, PgVectorStore

K = 20
EF_VALUES = (10, 20, 40, 60, 80, 100, 200, 400, 1000)  # 1000: the most pgvector allows
FEW_EF_VALUES = (10, 40, 400)  # for the variants (iterative scans are slow)
SAME_TABLE = ("pg-shared-planner", "pg-shared-iter")  # search pg-shared's table
SIZES = {
    "sample": (3, 120),
    "small": (50, 206),
    "paper": (500, 206),
    "tenx": (5_000, 206),
}  # users x facts each
DEFAULT_SIZES = ["sample", "small"]  # about a minute; --full adds the paper size
TOPICS = 64
NOISE = 1.0  # noise norm around a unit topic centre: cosine to the centre ~0.7
SHARES = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25)
SHARE_TABLE = 10_000  # --full: 50,000


def unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


class Topics:
    """Topic centres shared by all users; facts and queries are noisy copies of them."""

    def __init__(self, dims: int, seed: int = 0):
        self.rng = np.random.default_rng(seed)
        self.dims = dims
        self.centres = unit(self.rng.normal(size=(TOPICS, dims)))

    def sample(self, n: int) -> np.ndarray:
        topics = self.rng.integers(0, TOPICS, size=n)
        noise = unit(self.rng.normal(size=(n, self.dims))) * NOISE
        return unit(self.centres[topics] + noise)


def make_users(topics: Topics, sizes: dict[str, int]) -> dict[str, tuple[list[str], np.ndarray]]:
    return {u: ([f"{u}:f{i}" for i in range(n)], topics.sample(n)) for u, n in sizes.items()}


def open_stores(dsn: str, dims: int, tag: str, extension_has_iter: bool) -> dict[str, VectorStore]:
    stores: dict[str, VectorStore] = {
        "faiss": FaissStore(dims),
        "pg-shared": PgVectorStore(dsn, dims, layout="shared", table=f"b_{tag}_shared"),
        "pg-per-user": PgVectorStore(dsn, dims, layout="per_user", table=f"b_{tag}_own"),
    }
    # Same table as pg-shared, other session settings: the planner free to choose, and
    # iterative index scans.
    stores["pg-shared-planner"] = PgVectorStore(
        dsn, dims, layout="shared", table=f"b_{tag}_shared", force_hnsw=False
    )
    if extension_has_iter:
        stores["pg-shared-iter"] = PgVectorStore(
            dsn, dims, layout="shared", table=f"b_{tag}_shared", iterative_scan="relaxed_order"
        )
    return stores


def measure(
    store: VectorStore, queries: list[tuple[str, np.ndarray]], exact: list[SearchResult], ef: int
) -> dict[str, float]:
    returned, times, approx, ref = [], [], [], []
    for (user, q), ex in zip(queries, exact, strict=True):
        t0 = time.perf_counter()
        res = store.search(user, q, K, ef_search=ef)
        times.append(time.perf_counter() - t0)
        returned.append(int(res.returned[0]))
        approx.append(res.scores[0])
        ref.append(ex.scores[0])
    pad = lambda rows: np.where(np.isfinite(rows), rows, -3.4e38)  # noqa: E731
    recall = index.recall_at_k(pad(np.stack(approx)), pad(np.stack(ref)))
    ms = np.array(times) * 1000
    r = np.array(returned)
    return {
        "returned_mean": r.mean(),
        "returned_min": int(r.min()),
        "all_k_share": float((r >= K).mean()),
        "recall@20": recall,
        "p50_ms": float(np.percentile(ms, 50)),
        "p95_ms": float(np.percentile(ms, 95)),
    }


def exact_reference(facts: dict, queries: list[tuple[str, np.ndarray]]) -> list[SearchResult]:
    """Exact top-k within the query's user, from the generated vectors themselves."""
    out = []
    for user, q in queries:
        ids, x = facts[user]
        scores, rows = index.exact_search(x, q, K)
        names = np.array(list(ids) + [""], dtype=object)
        out.append(
            SearchResult(
                np.where(rows >= 0, scores, -np.inf).astype(np.float32),
                names[np.where(rows >= 0, rows, len(ids))],
            )
        )
    return out


def run_size(dsn: str, label: str, dims: int, n_queries: int, seed: int) -> list[dict]:
    n_users, per_user = SIZES[label]
    topics = Topics(dims, seed)
    facts = make_users(topics, {f"u{i:05d}": per_user for i in range(n_users)})
    users = list(facts)
    rng = np.random.default_rng(seed + 1)
    queries = [(users[int(rng.integers(len(users)))], topics.sample(1)) for _ in range(n_queries)]
    exact = exact_reference(facts, queries)
    probe = PgVectorStore(dsn, dims, table=f"b_{label}_shared")
    has_iter = probe.supports_iterative_scan
    probe.close()
    stores = open_stores(dsn, dims, label, has_iter)
    rows = []
    for name, store in stores.items():
        t0 = time.perf_counter()
        reuses = name in SAME_TABLE
        if not reuses:
            store.build_users(facts)
        build_s = time.perf_counter() - t0
        print(f"  {label}: {name} built {store.count():,} facts in {build_s:.1f} s", flush=True)
        for ef in FEW_EF_VALUES if reuses else EF_VALUES:
            row = {
                "size": label,
                "facts": n_users * per_user,
                "users": n_users,
                "store": name,
                "ef_search": ef,
                **measure(store, queries, exact, ef),
            }
            row["build_s"] = float("nan") if reuses else build_s
            rows.append(row)
        store.close()
    return rows


def share_sweep(
    dsn: str, dims: int, n_queries: int, seed: int, table_facts: int = SHARE_TABLE
) -> pd.DataFrame:
    """One shared table of ``table_facts`` facts; one probe user per share, the rest filler."""
    topics = Topics(dims, seed + 7)
    sizes = {f"s{share:g}": max(int(table_facts * share), 1) for share in SHARES}
    filler = table_facts - sum(sizes.values())
    sizes.update({f"fill{i:03d}": filler // 100 for i in range(100)})
    facts = make_users(topics, sizes)
    store = PgVectorStore(dsn, dims, layout="shared", table="b_share")
    store.build_users(facts)
    rows = []
    for share in SHARES:
        user = f"s{share:g}"
        queries = [(user, topics.sample(1)) for _ in range(n_queries)]
        exact = exact_reference(facts, queries)
        for ef in (40, 100, 400):
            m = measure(store, queries, exact, ef)
            rows.append(
                {
                    "user_share": share,
                    "user_facts": sizes[user],
                    "ef_search": ef,
                    "returned_mean": m["returned_mean"],
                    "all_k_share": m["all_k_share"],
                    "recall@20": m["recall@20"],
                }
            )
    store.close()
    return pd.DataFrame(rows)


def summarise(table: pd.DataFrame) -> None:
    print("\nSmallest ef_search at which every query returned 20 facts:")
    for (size, store), part in table.groupby(["size", "store"], sort=False):
        ok = part.loc[part["returned_min"] >= K, "ef_search"]
        print(f"  {size:>6} {store:<15} {int(ok.min()) if len(ok) else 'none up to 1000'}")
    paper = table[
        (table["size"] == "paper") & (table["store"] == "pg-shared") & (table["ef_search"] == 40)
    ]
    if len(paper):
        r = paper.iloc[0]
        print(
            f"\nPaper size, shared table, ef_search = 40: {r['returned_mean']:.2f} of 20 facts "
            f"returned on average (minimum {r['returned_min']}), {r['all_k_share']:.0%} of "
            f"queries got all 20, recall@20 {r['recall@20']:.3f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sizes",
        nargs="+",
        choices=list(SIZES),
        help=f"default {DEFAULT_SIZES} (about a minute); see --full",
    )
    parser.add_argument(
        "--full",
        action="store_true",
        help="the paper size (500 users x 206 facts, ~10 minutes) and a 50,000-"
        "fact share sweep; add --sizes ... tenx for 10x the paper",
    )
    parser.add_argument("--queries", type=int)
    parser.add_argument("--dims", type=int, default=256)
    parser.add_argument("--dsn", default="", help="an existing server (default: a private one)")
    parser.add_argument("--no-share-sweep", action="store_true")
    parser.add_argument("--out", type=Path, help="also write the table as CSV")
    args = parser.parse_args()
    args.sizes = args.sizes or (["sample", "paper"] if args.full else DEFAULT_SIZES)
    args.queries = args.queries or (200 if args.full else 100)
    share_facts = 50_000 if args.full else SHARE_TABLE
    workdir = Path(tempfile.mkdtemp(prefix="bench_vectorstore_"))
    rows = []
    try:
        with PgServer(workdir, dsn=args.dsn) as server:
            probe = PgVectorStore(server.dsn, args.dims, table="b_probe")
            print(
                f"{server.describe()}; PostgreSQL {probe.server_version}, pgvector "
                f"{probe.extension_version}; {args.dims} dimensions, k = {K}, "
                f"{args.queries} queries per size",
                flush=True,
            )
            probe.close()
            for label in args.sizes:
                rows += run_size(server.dsn, label, args.dims, args.queries, seed=len(rows))
            shares = (
                None
                if args.no_share_sweep
                else share_sweep(
                    server.dsn, args.dims, min(args.queries, 100), seed=1, table_facts=share_facts
                )
            )
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    table = pd.DataFrame(rows)
    pd.set_option("display.width", 200)
    print("\n" + table.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    if args.out:
        table.to_csv(args.out, index=False)
    summarise(table)
    if shares is not None:
        print(
            f"\nShared table of {share_facts:,} facts: returned facts and recall@20 by the "
            "user's share of the table (iterative scan off)"
        )
        print(shares.to_string(index=False, float_format=lambda v: f"{v:.3f}"))


if __name__ == "__main__":
    main()
