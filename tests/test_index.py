"""The FAISS store's per-user files: round trip, the checks on load, search quality against
exact search."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from memcost.llm import HashingEmbedder
from memcost.memory import faiss_store as index
from memcost.memory.faiss_store import FaissStore
from memcost.memory.vectors import IndexMismatch

TEXTS = [
    "Ana goes to yoga three times a week.",
    "Ana's sister Lena lives in Porto.",
    "Ben adopted a beagle called Pretzel in January 2023.",
    "Ben ran the Lisbon half marathon on 9 April 2023.",
    "Ana is painting a mural of kingfishers for the library.",
]


def ids(user: str, n: int) -> list[str]:
    return [f"{user}:f{i}" for i in range(n)]


def test_write_read_round_trip_searches_the_same(tmp_path):
    vectors = HashingEmbedder(64).embed(TEXTS)
    written = FaissStore(64, folder=tmp_path, m=8, ef_construction=32)
    written.build_user("ana", ids("ana", 5), vectors)
    read = FaissStore(0, folder=tmp_path)  # a reader that learns the dimensions from the files
    assert read.users() == ["ana"] and read.is_built("ana") and not read.is_built("ben")
    assert read.count("ana") == 5 and read.dims == 64
    files = index.read_user_files(tmp_path, "ana")
    assert files.meta == {
        "user": "ana",
        "dims": 64,
        "count": 5,
        "hnsw_m": 8,
        "ef_construction": 32,
        "metric": "inner_product",
    }
    table = pd.read_parquet(index.index_paths(tmp_path, "ana")[1])
    assert table["fact_id"].tolist() == ids("ana", 5)
    assert table["index_id"].tolist() == [0, 1, 2, 3, 4]
    query = HashingEmbedder(64).embed(["Where does Lena live?"])
    for store in (written, read):
        found = store.search("ana", query, 3)
        assert found.fact_ids[0][0] == "ana:f1"  # the Porto fact
        assert found.scores[0][0] == pytest.approx(float(vectors[1] @ query[0]), abs=1e-5)
    assert np.allclose(read.vectors("ana")[1], vectors, atol=1e-6)
    found = read.search("ana", query, 10)  # more than there are: padded
    assert (found.fact_ids[0][5:] == "").all() and np.isneginf(found.scores[0][5:]).all()
    assert found.returned.tolist() == [5]


def test_files_that_do_not_match_are_an_error_naming_the_user(tmp_path):
    embed = HashingEmbedder(32).embed
    store = FaissStore(32, folder=tmp_path)
    store.build_user("ana", ids("ana", 5), embed(TEXTS))
    store.build_user("ben", ids("ben", 4), embed(TEXTS[:4]))
    faiss_path, table_path = index.index_paths(tmp_path, "ana")

    def load():
        return FaissStore(32, folder=tmp_path).count("ana")

    table = pd.read_parquet(table_path)
    meta = {b"memcost.index": json.dumps(index.read_meta(table_path)).encode()}

    def write(frame):  # the fact ids edited, the file's own record kept
        arrow = pa.Table.from_pandas(frame, preserve_index=False).replace_schema_metadata(meta)
        pq.write_table(arrow, table_path)

    write(table.iloc[:4])  # a fact lost from the table
    with pytest.raises(IndexMismatch, match=r"user 'ana'.*5 vectors, the table 4 facts"):
        load()

    write(table.iloc[[1, 0, 2, 3, 4]])  # same facts, wrong order
    with pytest.raises(IndexMismatch, match=r"user 'ana'.*not the table's facts"):
        load()

    # Ben's index (4 vectors) beside a 4-fact table of Ana's: same count, but the ids carry
    # the user, so the facts do not match.
    ben_faiss, ben_table = index.index_paths(tmp_path, "ben")
    write(table.iloc[:4])
    shutil.copy(ben_faiss, faiss_path)
    with pytest.raises(IndexMismatch, match=r"user 'ana'.*not the table's facts"):
        load()

    shutil.copy(ben_table, table_path)  # Ben's files under Ana's name, table and all
    with pytest.raises(IndexMismatch, match=r"user 'ana'.*belong to user 'ben'"):
        load()

    faiss_path.unlink()
    assert not FaissStore(32, folder=tmp_path).is_built("ana")
    with pytest.raises(IndexMismatch, match=r"user 'ana': missing \['ana.faiss'\]"):
        load()
    with pytest.raises(IndexMismatch, match="32 dimensions, the questions. embeddings 16"):
        FaissStore(16, folder=tmp_path).count("ben")


def test_an_empty_memory_round_trips(tmp_path):
    FaissStore(16, folder=tmp_path).build_user("nobody", [], np.zeros((0, 16), np.float32))
    read = FaissStore(0, folder=tmp_path)
    assert read.count("nobody") == 0 and read.dims == 16
    found = read.search("nobody", np.ones((1, 16), np.float32), 20)
    assert (found.fact_ids == "").all() and found.fact_ids.shape == (1, 20)


def test_user_stems_are_safe_and_distinct():
    assert index.user_stem("conv-26") == "conv-26"
    assert index.user_stem("5ff60fd1_abs") == "5ff60fd1_abs"
    odd = [index.user_stem("a/b"), index.user_stem("a:b"), index.user_stem("../x")]
    assert len(set(odd)) == 3 and all("/" not in s and not s.startswith(".") for s in odd)
    assert index.fact_key("ana:f0") != index.fact_key("ben:f0") and index.fact_key("ana:f0") >= 0


def test_recall_counts_ties_as_found():
    exact = np.array([[0.9, 0.5, 0.5, -3.4e38]])
    assert index.recall_at_k(np.array([[0.9, 0.5, 0.5, -3.4e38]]), exact) == 1.0
    assert index.recall_at_k(np.array([[0.9, 0.5, 0.4, -3.4e38]]), exact) == pytest.approx(2 / 3)
    assert index.recall_at_k(np.array([[0.9, 0.4, 0.3, 0.2]]), exact) == pytest.approx(1 / 3)


def test_hnsw_finds_what_exact_search_finds_at_a_few_hundred_facts(tmp_path):
    rng = np.random.default_rng(7)
    vectors = rng.standard_normal((400, 48)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    store = FaissStore(48, folder=tmp_path)
    store.build_user("u", ids("u", 400), vectors)
    queries = rng.standard_normal((50, 48)).astype(np.float32)
    exact = store.exact_search("u", queries, 20)
    assert np.allclose(exact.scores[:, 0], (queries @ vectors.T).max(axis=1), atol=1e-5)
    low = store.search("u", queries, 20, ef_search=16).scores
    default = store.search("u", queries, 20).scores
    low, default = (index.recall_at_k(s, exact.scores) for s in (low, default))
    assert default >= 0.95 and default >= low
