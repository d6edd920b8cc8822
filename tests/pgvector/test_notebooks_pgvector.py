"""Notebooks 01-02 with ``vector_store = "pgvector"``: the embedded PostgreSQL server, one
dataset, started from a copy of notebook 00's files; and the all-or-nothing write of a user.

Skips, saying why, only when no embedded PostgreSQL wheel is installed on this platform.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from memcost.io import read_json, read_jsonl
from memcost.memory.facts import read_facts
from memcost.run import run_preset
from memcost_pgvector.store import PgServer, PgVectorStore, ServerUnavailable, provider

pytestmark = pytest.mark.timeout(300)
# The paper's memory alone: the smoke preset's other memory systems keep their items in files of
# their own, never in the vector store, so building them here would test nothing more.
ONLY_THE_STORES_USER = {"memory_systems": ["mem0_style"]}


@pytest.fixture(scope="module")
def wheel():
    try:
        return provider()[1]
    except ServerUnavailable as err:
        print(f"\nSKIP pgvector notebook tests: {err}")
        pytest.skip(str(err))


@pytest.mark.slow  # an optional extra's notebooks; the store itself is tested fast
def test_notebooks_01_02_on_a_shared_pgvector_table(wheel, prepared_run):
    run = prepared_run(("locomo",))
    run_preset(
        "smoke",
        run_name=str(run.root),
        steps=["01", "02"],
        datasets=["locomo"],
        overrides={"vector_store": "pgvector", "pgvector_layout": "shared", **ONLY_THE_STORES_USER},
        stream=False,
    )
    ds = run.dataset("locomo")

    entry = read_json(run.manifest)["vector_store"]["locomo"]
    assert entry["vector_store"] == "pgvector" and entry["layout"] == "shared"
    assert entry["postgresql"].split(".")[0].isdigit() and entry["pgvector"].count(".") == 2
    assert entry["server"]["server"] == "embedded" and entry["server"]["provider"] == wheel
    assert entry["server"]["pgdata"] == str(run.root / "pgvector" / "pgdata")
    assert not list((ds.memory / "index").glob("*.faiss"))  # nothing went to FAISS files

    facts = read_facts(ds)
    active = facts.loc[facts["status"] == "active"]
    answers = read_jsonl(ds.answers / "answers_memory_mem0_style.jsonl")
    questions = pd.read_parquet(ds.data / "questions.parquet")
    assert len(answers) == len(questions) and all(a["answer"] for a in answers)
    for a in answers:  # isolation: only the question's user's facts come back
        assert all(f.startswith(f"{a['conversation_id']}:") for f in a["retrieved_item_ids"])
    m02 = read_json(ds.metrics / "02_answer_from_memory.json")["metrics"]
    assert m02["vector_store"] == "pgvector" and m02["cross_user_retrievals"] == 0
    assert 0 < m02["store_returned_mean"] <= 20 and 0 < m02["store_recall_at_20"] <= 1

    # The rows are in PostgreSQL, committed: one marker per user, the active facts and no others.
    with PgServer(run.root / "pgvector") as server:
        store = PgVectorStore(server.dsn, entry["dims"], table="locomo_shared")
        users = sorted(active["conversation_id"].unique())
        assert store.users() == users
        for user in users:
            ids, x = store.vectors(user)
            assert ids == sorted(active.loc[active["conversation_id"] == user, "fact_id"])
            assert np.allclose(np.linalg.norm(x, axis=1), 1, atol=4e-3)  # 2^-11 grid
        # another user's identical fact never comes back
        a, b = users[:2]
        probe = store.vectors(b)[1][:1]
        assert all(f.startswith(f"{a}:") for f in store.search(a, probe, 20).fact_ids[0] if f)
        assert store.search(b, probe, 1).fact_ids[0, 0].startswith(f"{b}:")
        store.close()


def test_a_failed_user_build_leaves_no_rows(wheel, tmp_path):
    with PgServer(tmp_path / "pg") as server:
        store = PgVectorStore(server.dsn, 4, table="atomic_shared")
        x = np.eye(4, dtype=np.float32)
        with pytest.raises(RuntimeError, match="killed"), store.transaction():
            store.build_user("u", [], np.zeros((0, 4), np.float32))
            store.add("u", ["u:f0", "u:f1"], x[:2])
            store.apply("u", upserts=(["u:f2"], x[2:3]), deletes=["u:f0"])
            raise RuntimeError("killed in the middle of the user's build")
        assert not store.is_built("u") and store.count() == 0
        with store.transaction():
            store.build_user("u", [], np.zeros((0, 4), np.float32))
            store.add("u", ["u:f0", "u:f1"], x[:2])
            store.apply("u", upserts=(["u:f2"], x[2:3]), deletes=["u:f0"])
        assert store.is_built("u") and store.vectors("u")[0] == ["u:f1", "u:f2"]
        store.close()


@pytest.mark.slow  # an optional extra's notebooks; the store itself is tested fast
def test_a_resumed_run_reuses_the_servers_data_and_rebuilds_what_the_store_lacks(
    wheel, prepared_run
):
    run = prepared_run(("locomo",))
    again = {
        "run_name": str(run.root),
        "steps": ["01"],
        "datasets": ["locomo"],
        "stream": False,
        "overrides": {
            "vector_store": "pgvector",
            "pgvector_layout": "per_user",
            **ONLY_THE_STORES_USER,
        },
    }
    metrics = run.dataset("locomo").metrics / "01_extract_facts.json"
    run_preset("smoke", **again)
    built = read_json(metrics)["metrics"]
    assert built["users_built"] > 1 and built["users_resumed"] == 0
    run_preset("smoke", **again)  # the server starts again on the run's data
    resumed = read_json(metrics)["metrics"]
    assert resumed["users_built"] == 0 and resumed["users_resumed"] == built["users_built"]
    table = "locomo_per_user"
    with PgServer(run.root / "pgvector") as server:  # a user whose committed build is gone
        store = PgVectorStore(server.dsn, 1536, layout="per_user", table=table)
        lost = store.users()[0]
        store.conn.execute(f"DELETE FROM {table}_users WHERE user_id = %s", (lost,))
        store.close()
    run_preset("smoke", **again)
    redone = read_json(metrics)["metrics"]
    assert redone["users_built"] == 1 and redone["users_resumed"] == built["users_built"] - 1
