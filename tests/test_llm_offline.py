"""The offline backend and the hashing embedder: same interfaces, no network, deterministic."""

from __future__ import annotations

import hashlib
import json
import math
import os
import sqlite3
import subprocess
import sys

import numpy as np
import pytest

from memcost.calls import CallStore, read_calls
from memcost.llm import ChatRequest, HashingEmbedder, make_client, parse_json_object
from memcost.text import count_tokens

# A stage-like offline method: reads the structured payload, never the prompt text.
OFFLINE_SCRIPT = r"""
import hashlib, json, sys
from pathlib import Path
from memcost.llm import ChatRequest, make_client, parse_json_object
from memcost.paths import RunPaths
from memcost.calls import read_calls

def extract(request):
    facts = [t for t in request.payload["turns"] if " " in t]
    return json.dumps({"facts": [f"{request.payload['speaker']} said: {t}" for t in facts]})

run = RunPaths(Path(sys.argv[1])).ensure()
client = make_client(run, backend="offline", progress=False)
requests = [
    ChatRequest("gpt-5-nano-2025-08-07", (("system", "Extract facts."), ("user", "\n".join(turns))),
                "extract", "extract@v1", reasoning_effort="low",
                payload={"speaker": f"user{i}", "turns": turns}, tags={"conversation_id": f"c{i}"})
    for i, turns in enumerate(
        [["I adopted a dog", "ok"], ["My sister lives in Lyon", "We ski in March"]] * 3
    )
]
results = client.chat_many(requests, offline=extract, parse=parse_json_object)
facts = [f for r in results for f in r.parsed["facts"]]
vectors = client.embed(facts, tags={"conversation_id": "all"})
records = [{k: v for k, v in r.items() if k not in ("timestamp", "latency_s")} for r in
           read_calls(run)]
print(json.dumps({
    "results": [[r.text, r.parsed, r.usage.as_dict(), r.request_hash, r.backend] for r in results],
    "vectors": hashlib.sha256(vectors.tobytes()).hexdigest(),
    "records": records,
}, sort_keys=True))
"""


def test_offline_backend_is_byte_identical_in_two_processes(tmp_path):
    outputs = []
    for k, seed in enumerate(("1", "987")):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        done = subprocess.run(
            [sys.executable, "-c", OFFLINE_SCRIPT, str(tmp_path / f"run{k}")],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        outputs.append(done.stdout)
    assert outputs[0] == outputs[1]
    data = json.loads(outputs[0])
    assert all(r["backend"] == "offline" and r["provider"] == "offline" for r in data["records"])
    assert len(data["records"]) == 6 + 1  # six extraction calls, one embedding batch


def extract(request: ChatRequest) -> str:
    return json.dumps(
        {"facts": [f"{request.payload['speaker']} likes {x}" for x in request.payload["likes"]]}
    )


def requests(n: int = 4) -> list[ChatRequest]:
    return [
        ChatRequest(
            "gpt-5-nano-2025-08-07",
            (("system", "Extract facts."), ("user", f"I like tea and item {i}.")),
            "extract",
            "extract@v1",
            reasoning_effort="low",
            payload={"speaker": "Ana", "likes": ["tea", f"item {i}"]},
            tags={"conversation_id": f"c{i}"},
        )
        for i in range(n)
    ]


def test_offline_calls_report_o200k_usage_and_are_recorded_once(run_paths, tmp_path):
    client = make_client(run_paths, backend="offline", progress=False)
    results = client.chat_many(requests(), offline=extract, parse=parse_json_object)
    first = results[0]
    assert first.parsed == {"facts": ["Ana likes tea", "Ana likes item 0"]}
    assert first.usage.prompt_tokens == count_tokens("Extract facts.") + count_tokens(
        "I like tea and item 0."
    )
    assert first.usage.completion_tokens == count_tokens(first.text)
    assert first.usage.reasoning_tokens == 0 and first.backend == "offline" and first.attempts == 1
    records = read_calls(run_paths.calls)
    assert len(records) == 4
    assert all(
        r["backend"] == "offline" and not r["cached"] and r["error"] is None for r in records
    )
    assert records[0]["prompt_tokens"] == first.usage.prompt_tokens
    assert not (tmp_path / "c.sqlite").exists()  # offline calls never touch the cache
    # a rerun in the same run directory: the ledger already has every call
    again = make_client(run_paths, backend="offline", progress=False)
    assert [r.text for r in again.chat_many(requests(), offline=extract)] == [
        r.text for r in results
    ]
    assert len(read_calls(run_paths.calls)) == 4 and again.stats.replayed == 4
    summary = again.summary()
    assert (
        summary["offline_calls"] == 4 and summary["estimated_usd"] > 0 and summary["paid_usd"] == 0
    )


def test_an_offline_progress_bar_says_offline_beside_the_configured_model(run_paths, capsys):
    # the bar names the model the stand-in is priced as; offline it must say it is no model
    client = make_client(run_paths, backend="offline", progress=True)
    client.chat_many(requests(), offline=extract, parse=parse_json_object)
    err = capsys.readouterr().err
    assert "extract gpt-5-nano-2025-08-07 (offline): 100%" in err and "est=$" in err


def test_offline_without_a_method_says_what_is_missing(run_paths):
    client = make_client(run_paths, backend="offline", progress=False)
    with pytest.raises(ValueError, match="offline method"):
        client.chat(requests(1)[0])


def test_offline_groups_and_json_reasks_use_the_same_plumbing(run_paths):
    client = make_client(run_paths, backend="offline", progress=False, max_reasks=1)
    out = client.chat_groups(
        [requests(2), requests(3)[2:]], offline=lambda r: "not json", parse=parse_json_object
    )
    assert [len(g) for g in out] == [2, 1]
    assert all(r.parse_error and r.calls == 2 for g in out for r in g)
    assert client.stats.parse_failures == 3 and client.stats.reasks == 3


def test_hashing_embedder_is_pinned_normalised_and_lexical():
    embedder = HashingEmbedder()
    texts = ["Caroline went to the LGBTQ support group on 7 May 2023.", "Melanie paints sunrises."]
    vectors = embedder.embed(texts)
    assert vectors.shape == (2, 1536) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=4e-3)  # on the 2^-11 grid
    # pinned: the same bytes on every machine (blake2b buckets, exactly rounded norms)
    assert (
        hashlib.sha256(vectors.tobytes()).hexdigest()
        == "d1d6c1b37db18a4dc1f9cafb3ffa675231318aadd1bbb0f0c19e0796e85ce343"
    )
    query, near, far = embedder.embed(
        [
            "Which support group did Caroline go to?",
            "Caroline joined a support group.",
            "Melanie paints sunrises.",
        ]
    )
    assert float(query @ near) > float(query @ far)
    assert not embedder.embed(["", "!!!"]).any()
    assert HashingEmbedder(64).embed(["a b c"]).shape == (1, 64)
    # sublinear tf: repeating a word shifts weight towards it, but not tenfold
    once, many = embedder.embed(["dog cat", "dog dog dog dog dog dog dog dog dog dog cat"])
    assert float(once @ many) > 0.5


def test_offline_inner_products_are_exact_in_any_summation_order():
    """The components lie on a 2^-11 grid, so a float32 inner product is exact whichever order
    a CPU adds it in: a top-k search ranks tied and near-tied facts the same on every machine
    (they used to come back as +1e-9 on one CPU and -1e-9 on another)."""
    texts = [
        "Caroline went to the LGBTQ support group on 7 May 2023.",
        "Which support group did Caroline go to?",
        "Melanie paints sunrises by the lake every weekend. " * 40,  # a long, flat vector
        "Jon lost his job as a banker and opened a dance studio.",
    ]
    vectors = HashingEmbedder().embed(texts)
    rng = np.random.default_rng(0)
    for a in vectors:
        for b in vectors:
            exact = math.fsum(a.astype(np.float64) * b.astype(np.float64))
            assert float(a @ b) == exact  # numpy's (SIMD) order
            shuffled = np.float32(0)
            for i in rng.permutation(len(a)):  # one float32 addition at a time, shuffled
                shuffled = np.float32(shuffled + a[i] * b[i])
            assert float(shuffled) == exact


def test_hashing_embedder_is_stable_across_processes():
    code = (
        "import hashlib\nfrom memcost.llm import HashingEmbedder\n"
        "v = HashingEmbedder().embed(['Caroline went to the LGBTQ support group on 7 May 2023.', "
        "'Melanie paints sunrises.'])\nprint(hashlib.sha256(v.tobytes()).hexdigest())"
    )
    digests = {
        subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONHASHSEED": seed},
        ).stdout.strip()
        for seed in ("0", "4242")
    }
    assert digests == {"d1d6c1b37db18a4dc1f9cafb3ffa675231318aadd1bbb0f0c19e0796e85ce343"}


def test_offline_embeddings_through_the_client(run_paths):
    client = make_client(run_paths, backend="offline", progress=False)
    texts = ["Ana likes tea.", "", "Ana likes green tea."]
    vectors = client.embed(texts, tags={"conversation_id": "c1"})
    assert vectors.shape == (3, 1536) and not vectors[1].any()
    assert np.array_equal(vectors[[0, 2]], HashingEmbedder().embed([texts[0], texts[2]]))
    (record,) = read_calls(run_paths.calls)
    assert record["backend"] == "offline" and record["stage"] == "embed"
    assert record["prompt_tokens"] == count_tokens(texts[0]) + count_tokens(texts[2])
    assert record["model"] == "text-embedding-3-small" and record["conversation_id"] == "c1"


def test_a_rerun_records_again_the_calls_recorded_failed_or_damaged(run_paths, capsys):
    """A rerun's batch knows the calls recorded before it began without a query each: those
    recorded with an error, or whose record is damaged, are recorded again; the others not."""
    client = make_client(run_paths, backend="offline", progress=False)
    client.chat_many(requests(), offline=extract)
    with sqlite3.connect(run_paths.calls) as conn:
        seqs = [s for (s,) in conn.execute("SELECT seq FROM calls ORDER BY seq")]
        conn.execute(
            "UPDATE calls SET record = json_set(record, '$.error', 'timed out') WHERE seq = ?",
            (seqs[0],),
        )
        conn.execute("UPDATE calls SET record = '{\"stage\": ' WHERE seq = ?", (seqs[1],))
    again = make_client(run_paths, backend="offline", progress=False)
    again.chat_many(requests(), offline=extract)
    assert again.stats.replayed == 2 and again.stats.recorded == 2
    assert "a call record is damaged (not readable JSON): the call is made again" in (
        capsys.readouterr().err
    )
    third = make_client(run_paths, backend="offline", progress=False)
    third.chat_many(requests(), offline=extract)
    assert third.stats.replayed == 4 and third.stats.recorded == 0


def test_a_batch_that_cannot_read_the_store_leaves_no_batch_open(run_paths, monkeypatch):
    """A batch whose first query fails ends there: the next offline record is written at once,
    not held for a batch that never closes."""
    store = CallStore(run_paths.root)

    def unreadable() -> None:
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(store, "_learn_recorded", unreadable)
    with pytest.raises(sqlite3.OperationalError), store.deferring():
        pass
    store.add({"request_hash": "h", "stage": "judge", "error": None}, offline=True)
    assert len(read_calls(run_paths.root)) == 1  # another connection sees it
    store.close()
