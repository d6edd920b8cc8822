"""A resume checks the ledger against the work it finds done: an answer, a vote or a memory whose
calls are not in the store of calls (lost with a full disk, or a deleted store) is made again, so
that the cost tables count everything the run shows; with a paid backend a missing store is
refused instead of paid twice."""

from __future__ import annotations

import shutil
import sqlite3
from collections import Counter
from types import SimpleNamespace

import pytest

from memcost.answers import AnswerWriter
from memcost.calls import CallStore, read_calls
from memcost.cli import main
from memcost.judge.votes import _still_to_ask
from memcost.memory.base import recorded_builds

LOSSES = (
    # what a full disk once took from a run that then resumed and exited 0: the memory reads of
    # one system, a baseline's answers, judge votes, and one user's build
    "stage = 'read' AND system = 'memory_graph' AND seq % 2 = 0",
    "stage = 'long_context' AND system = 'no_context_gpt-5-mini'",
    "stage = 'judge' AND system = 'memory_rag' AND seq % 3 = 0",
    "stage = 'update' AND system = 'memory_mem0_style' AND conversation_id = 'conv-1'",
    "stage = 'extract' AND system = 'memory_graph' AND conversation_id = 'conv-2'",
)


def ledger(run) -> Counter:
    """LoCoMo's calls by stage, system and user."""
    return Counter(
        (r["stage"], r.get("system"), r.get("conversation_id"))
        for r in read_calls(run)
        if r.get("dataset") == "locomo"
    )


def _record(stage, system, conversation, question=None, *, vote=0, error=None, tag=""):
    return {
        "stage": stage,
        "system": system,
        "conversation_id": conversation,
        "question_id": question,
        "request_hash": f"h-{stage}-{system}-{conversation}-{question}-{tag}",
        "sample_index": vote,
        "error": error,
        "dataset": "locomo",
    }


ANSWER = {
    "conversation_id": "u1",
    "answer": "Paris",
    "model": "gpt-5-mini",
    "backend": "offline",
    "prompt_version": "read@v1",
    "prompt_tokens": 10,
    "cached_prompt_tokens": 0,
    "completion_tokens": 2,
    "reasoning_tokens": 0,
    "latency_s": 0.01,
    "error": None,
}


@pytest.fixture
def store(tmp_path):
    with CallStore(tmp_path / "run") as calls:
        yield calls


def test_the_store_counts_its_error_free_calls_by_any_fields(store):
    for i in range(3):
        store.add(_record("extract", "memory_graph", "u1", tag=str(i)))
    store.add(_record("extract", "memory_graph", "u1", tag="x", error="timeout"))
    store.add(_record("read", "memory_graph", "u1", "q1"))
    counts = store.on_ledger(("extract", "update"), "system", "conversation_id")
    assert counts == Counter({("memory_graph", "u1"): 3})
    assert store.on_ledger(("read",), "question_id") == Counter({("q1",): 1})


def test_an_answer_without_its_call_on_the_ledger_is_asked_again(run_paths, capsys):
    ds = run_paths.dataset("locomo").ensure()
    with AnswerWriter(ds, "memory_rag") as writer:
        for q in ("q1", "q2", "q3"):
            writer.write(ANSWER | {"question_id": q})
    assert AnswerWriter(ds, "memory_rag").pending(["q1", "q2", "q3"]) == []
    writer = AnswerWriter(ds, "memory_rag", on_ledger={"q2"})
    assert writer.pending(["q1", "q2", "q3"]) == ["q1", "q3"]
    writer.close()
    assert "2 answer(s) of memory_rag in answers_memory_rag.jsonl have no call" in (
        capsys.readouterr().err
    )


def test_a_vote_without_its_call_on_the_ledger_is_asked_again(capsys):
    request = SimpleNamespace(
        key=lambda identity: "h1", tags={"system": "memory_rag", "question_id": "q1"}
    )
    requests = [SimpleNamespace(**vars(request), sample_index=v) for v in (0, 1)]
    earlier = [
        {"request_hash": "h1", "system": "memory_rag", "question_id": "q1", "vote": v}
        for v in (0, 1)
    ]
    recorded = Counter({("h1", 0, "memory_rag", "q1"): 1})
    kept, pending = _still_to_ask(requests, "offline", earlier, {}, recorded)
    assert [r["vote"] for r in kept] == [0]
    assert [r.sample_index for r in pending] == [1]
    assert "1 judge vote(s) have no call" in capsys.readouterr().err
    # the same request for another system's answer is another call
    other = Counter({("h1", v, "memory_graph", "q1"): 1 for v in (0, 1)})
    kept, pending = _still_to_ask(requests, "offline", earlier, {}, other)
    assert kept == [] and len(pending) == 2


def test_a_user_marked_built_without_its_build_calls_is_built_again(store, capsys):
    for i in range(5):
        store.add(_record("extract", "memory_mem0_style", "u1", tag=str(i)))
    for i in range(2):  # u2: a walk-through of two segments, then its records lost
        store.add(_record("extract", "memory_mem0_style", "u2", tag=str(i)))
    store.add(_record("embed", "memory_rag", "u1"))
    client = SimpleNamespace(store=store)
    assert recorded_builds(client, "memory_mem0_style", {"u1": 5, "u2": 7, "u3": 3}) == ["u1"]
    assert "2 user(s) of memory_mem0_style marked built lack build calls" in (
        capsys.readouterr().err
    )
    # a build that made no chat call (RAG only embeds) has nothing the marker can be checked by
    assert recorded_builds(client, "memory_rag", {"u1": 0, "u2": 0}) == ["u1", "u2"]


@pytest.mark.slow
def test_a_resume_makes_again_the_work_whose_calls_the_store_lost(smoke_run, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(smoke_run.root, run)
    before = ledger(run)
    with sqlite3.connect(run / "calls.sqlite") as db:
        fields = "stage system conversation_id dataset".split()
        view = ", ".join(f"json_extract(record, '$.{f}') AS {f}" for f in fields)
        lost = 0
        for where in LOSSES:
            lost += db.execute(
                f"DELETE FROM calls WHERE seq IN (SELECT seq FROM (SELECT seq, {view} FROM calls) "
                f"WHERE dataset = 'locomo' AND {where})"
            ).rowcount
    assert lost > 100
    assert ledger(run) != before

    code = main(
        ["run", "--params", "smoke", "--run-name", str(run), "--datasets", "locomo", "--quiet"]
    )
    assert code == 0
    assert ledger(run) == before
    logs = "".join(p.read_text() for p in (run / "logs").glob("locomo-0*.log"))
    assert "answer(s) of memory_graph in answers_memory_graph.jsonl have no call" in logs
    assert "answer(s) of no_context_gpt-5-mini" in logs
    assert "judge vote(s) have no call in the run's store of calls" in logs
    assert "1 user(s) of memory_mem0_style marked built lack build calls" in logs
    assert "1 user(s) of memory_graph marked built lack build calls" in logs


def test_a_missing_store_with_a_paid_backend_is_refused_in_one_line(smoke_run, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(smoke_run.dataset("locomo").root, run / "locomo")
    code = main(
        [
            "run",
            "--params",
            "smoke",
            "--run-name",
            str(run),
            "--datasets",
            "locomo",
            "-p",
            "backend=custom",
            "-p",
            "base_url=http://127.0.0.1:9/v1",
        ]
    )
    err = capsys.readouterr().err
    assert code == 2
    (line,) = [ln for ln in err.splitlines() if "error:" in ln]
    assert f"{run / 'calls.sqlite'}, the run's store of calls, is missing" in line
    assert "a resume would pay for them again. Put the file back, or start a new run" in line
    assert not (run / "calls.sqlite").exists()
