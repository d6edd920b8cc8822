"""How many of the 20 facts a question asks for mem0's own pgvector store returns, at scale.

The study's memory arm is mem0 on PostgreSQL + pgvector with an HNSW index (§3.1, Appendix C).
mem0 1.0.x keeps every user of a collection in one table (the user in a JSON payload) and
searches with ``WHERE payload->>'user_id' = ... ORDER BY vector <=> q LIMIT 20``. With its HNSW
index the planner walks the index first and filters after: a user whose facts are a thin slice of
the table gets only the few of the ``hnsw.ef_search`` nearest candidates that are his. This
script fills mem0's ``PGVector`` class (the library's own code, no model call) with
LongMemEval-S-shaped data, 500 users × 206 facts in one collection (``--users 50`` for a quick
look), topic-structured random vectors as ``bench_vectorstore.py`` makes them, and prints per
setting the mean and the 5th percentile of facts returned per question out of 20, and recall@20
against an exact search within the user:

- ``ef_search 40``: pgvector's default, what a run of the study got;
- ``ef_search 400``, ``1000``: the setting a careful user raises first;
- ``iterative relaxed``: pgvector 0.8's ``hnsw.iterative_scan = relaxed_order`` with
  ``hnsw.max_scan_tuples`` 20,000, which keeps scanning until the filter has its 20;
- ``no index``: the planner forced off the HNSW index (exact, slower).

    python benchmarks/bench_mem0_store.py [--users 500] [--per-user 206] [--queries 200]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_vectorstore import Topics  # noqa: E402 - the same data as the repository's store

from memcost_pgvector.store import PgServer  # noqa: E402

K = 20
SETTINGS = {
    "ef_search 40 (pgvector default)": ["SET hnsw.ef_search = 40"],
    "ef_search 400": ["SET hnsw.ef_search = 400"],
    "ef_search 1000": ["SET hnsw.ef_search = 1000"],
    "iterative relaxed": [
        "SET hnsw.ef_search = 40",
        "SET hnsw.iterative_scan = relaxed_order",
        "SET hnsw.max_scan_tuples = 20000",
    ],
    "no index (exact)": ["SET enable_indexscan = off"],
}


def fill(store, users: int, per_user: int, dims: int, seed: int) -> tuple[dict, Topics]:
    topics = Topics(dims, seed)
    facts = {}
    for u in range(users):
        user = f"u{u:05d}"
        vectors = topics.sample(per_user)
        ids = [f"{user}-{i}" for i in range(per_user)]
        store.insert(
            vectors.tolist(),
            [{"user_id": user, "data": i} for i in ids],
            [str(__import__("uuid").uuid5(__import__("uuid").NAMESPACE_URL, i)) for i in ids],
        )
        facts[user] = vectors
    return facts, topics


def measure(store, facts: dict, queries: list, statements: list[str]) -> dict:
    returned, recalls, latency = [], [], []
    with store._get_cursor() as cur:
        for statement in statements:
            cur.execute(statement)
    for user, query in queries:
        with store._get_cursor() as cur:  # the pool holds one connection: its session settings
            for statement in statements:
                cur.execute(statement)
        t0 = time.perf_counter()
        found = store.search("", query.tolist(), limit=K, filters={"user_id": user})
        latency.append(time.perf_counter() - t0)
        returned.append(len(found))
        exact = set(np.argsort(-(facts[user] @ query))[:K])
        got = {int(r.payload["data"].rsplit("-", 1)[1]) for r in found}
        recalls.append(len(got & exact) / K)
    return {
        "returned_mean": float(np.mean(returned)),
        "returned_p5": float(np.percentile(returned, 5)),
        "all_20_share": float(np.mean(np.array(returned) == K)),
        "recall_at_20": float(np.mean(recalls)),
        "latency_p50_ms": float(np.percentile(latency, 50) * 1000),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=500)
    parser.add_argument("--per-user", type=int, default=206)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--dims", type=int, default=256)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    from mem0.vector_stores.pgvector import PGVector

    with tempfile.TemporaryDirectory() as tmp, PgServer(Path(tmp) / "pg") as server:
        store = PGVector(
            dbname="",
            collection_name="mem0_bench",
            embedding_model_dims=args.dims,
            user=None,
            password=None,
            host=None,
            port=None,
            diskann=False,
            hnsw=True,
            connection_string=server.start(),
            minconn=1,
            maxconn=1,
        )
        t0 = time.perf_counter()
        facts, topics = fill(store, args.users, args.per_user, args.dims, args.seed)
        print(
            f"mem0 1.0 PGVector: {args.users} users x {args.per_user} facts in one collection, "
            f"HNSW (m = 16, ef_construction = 64, cosine) built with the rows, "
            f"{time.perf_counter() - t0:.0f} s"
        )
        rng = np.random.default_rng(args.seed + 1)
        users = list(facts)
        queries = [
            (users[int(rng.integers(len(users)))], topics.sample(1)[0]) for _ in range(args.queries)
        ]
        rows = [
            {"setting": name, **measure(store, facts, queries, statements)}
            for name, statements in SETTINGS.items()
        ]
        store.connection_pool.close()
    table = pd.DataFrame(rows)
    with pd.option_context("display.width", 160):
        print(table.round(3).to_string(index=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
