"""Per-user HNSW indexes: round trip, the checks on load, search quality against exact search."""

from __future__ import annotations

import shutil

import numpy as np
import pandas as pd
import pytest

from memcost.llm import HashingEmbedder
from memcost.memory import store as index


def fact_table(user: str, texts: list[str]) -> pd.DataFrame:
    return pd.DataFrame({
        "fact_id": [f"{user}:f{i}" for i in range(len(texts))],
        "conversation_id": user,
        "text": texts,
    })


TEXTS = [
    "Ana goes to yoga three times a week.",
    "Ana's sister Lena lives in Porto.",
    "Ben adopted a beagle called Pretzel in January 2023.",
    "Ben ran the Lisbon half marathon on 9 April 2023.",
    "Ana is painting a mural of kingfishers for the library.",
]


def test_save_load_round_trip_searches_the_same(tmp_path):
    vectors = HashingEmbedder(64).embed(TEXTS)
    saved = index.save_user_index(tmp_path, "ana", vectors, fact_table("ana", TEXTS), m=8,
                                  ef_construction=32, extra_meta={"embedding_model": "x"})
    loaded = index.load_user_index(tmp_path, "ana")
    assert len(loaded) == 5 and loaded.dims == 64
    assert loaded.meta == {"user": "ana", "dims": 64, "count": 5, "hnsw_m": 8,
                           "ef_construction": 32, "metric": "inner_product",
                           "embedding_model": "x"}
    assert loaded.table["index_id"].tolist() == [0, 1, 2, 3, 4]
    query = HashingEmbedder(64).embed(["Where does Lena live?"])
    for idx in (saved, loaded):
        scores, rows = idx.search(query, 3)
        assert rows[0][0] == 1  # the Porto fact
        assert scores[0][0] == pytest.approx(float(vectors[1] @ query[0]), abs=1e-5)
    assert np.allclose(loaded.vectors(), vectors, atol=1e-6)
    scores, rows = loaded.search(query, 10)  # more than there are: padded
    assert (rows[0][5:] == -1).all() and np.isneginf(scores[0][5:]).all()


def test_an_index_that_does_not_match_its_table_is_an_error_naming_the_user(tmp_path):
    embed = HashingEmbedder(32).embed
    index.save_user_index(tmp_path, "ana", embed(TEXTS), fact_table("ana", TEXTS))
    index.save_user_index(tmp_path, "ben", embed(TEXTS[:4]), fact_table("ben", TEXTS[:4]))
    faiss_path, table_path = index.index_paths(tmp_path, "ana")

    table = pd.read_parquet(table_path)
    table.iloc[:4].to_parquet(table_path)  # a fact lost from the table
    with pytest.raises(index.IndexMismatch, match=r"user 'ana'.*5 vectors, the table 4 facts"):
        index.load_user_index(tmp_path, "ana")

    table.iloc[[1, 0, 2, 3, 4]].to_parquet(table_path)  # same facts, wrong order
    with pytest.raises(index.IndexMismatch, match=r"user 'ana'.*not the table's facts"):
        index.load_user_index(tmp_path, "ana")

    # Ben's index (4 vectors) beside a 4-fact table of Ana's: same count, but the ids carry
    # the user, so the facts do not match.
    ben_faiss, ben_table = index.index_paths(tmp_path, "ben")
    table.iloc[:4].to_parquet(table_path)
    shutil.copy(ben_faiss, faiss_path)
    with pytest.raises(index.IndexMismatch, match=r"user 'ana'.*not the table's facts"):
        index.load_user_index(tmp_path, "ana")

    shutil.copy(ben_table, table_path)  # Ben's files under Ana's name, table and all
    with pytest.raises(index.IndexMismatch, match=r"user 'ana'.*belongs to user 'ben'"):
        index.load_user_index(tmp_path, "ana")

    faiss_path.unlink()
    with pytest.raises(index.IndexMismatch, match=r"user 'ana': missing \['ana.faiss'\]"):
        index.load_user_index(tmp_path, "ana")


def test_an_empty_memory_round_trips(tmp_path):
    empty = fact_table("nobody", [])
    index.save_user_index(tmp_path, "nobody", np.zeros((0, 16), np.float32), empty, dims=16)
    loaded = index.load_user_index(tmp_path, "nobody")
    assert len(loaded) == 0 and loaded.dims == 16
    scores, rows = loaded.search(np.ones((1, 16), np.float32), 20)
    assert (rows == -1).all() and rows.shape == (1, 20)


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
    table = fact_table("u", [f"fact {i}" for i in range(400)])
    idx = index.save_user_index(tmp_path, "u", vectors, table)
    queries = rng.standard_normal((50, 48)).astype(np.float32)
    exact_scores, exact_rows = index.exact_search(vectors, queries, 20)
    assert np.allclose(exact_scores[:, 0], (queries @ vectors.T).max(axis=1), atol=1e-5)
    low_scores, _ = idx.search(queries, 20, ef_search=16)
    default_scores, _ = idx.search(queries, 20)
    low, default = (index.recall_at_k(s, exact_scores) for s in (low_scores, default_scores))
    assert default >= 0.95 and default >= low
