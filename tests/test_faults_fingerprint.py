"""Reusing a run name never mixes results: answers are keyed by question and fingerprint, so
switching a run from the offline backend to an API answers every question again."""

from __future__ import annotations

import pandas as pd
import pytest
from fake_api.openai_server import CHAT_PATH, FakeOpenAIServer
from llm_helpers import TEST_KEY, api_client
from test_memory import answer_from_memory, api_responder, yoga_conversation

from memcost.answers import AnswerWriter, load_answers
from memcost.io import read_jsonl
from memcost.llm import make_client
from memcost.manifest import fingerprint
from memcost.memory import facts as memory_files
from memcost.memory.facts import read_facts
from memcost.memory.mem0_style import MemoryBuilder, MemoryConfig

QUESTIONS = pd.DataFrame(
    [
        {
            "question_id": f"pair-1-q{i}",
            "conversation_id": "pair-1",
            "question": text,
            "answer": "three times a week",
            "adversarial_answer": None,
            "category": "single_hop",
            "category_id": 4,
            "question_date": None,
            "evidence": ["D2:1"],
            "is_abstention": False,
            "options": None,
            "extra": "{}",
        }
        for i, text in enumerate(
            ["How often does Ana go to yoga?", "What is the name of Ben's dog?"]
        )
    ]
)


def answer(run, client):
    ds = run.dataset("locomo").ensure()
    turns = yoga_conversation()
    MemoryBuilder(client, ds, MemoryConfig(dataset="locomo")).run(turns, ["pair-1"])
    report = answer_from_memory(client, ds, QUESTIONS, turns, dataset="locomo")
    return ds, report


def test_switching_offline_to_an_api_answers_again_and_keeps_nothing_offline(
    run_paths, tmp_path, monkeypatch
):
    monkeypatch.setenv("OPENAI_API_KEY", TEST_KEY)
    offline = make_client(run_paths, progress=False)
    ds, report = answer(run_paths, offline)
    offline.close()
    assert report.answered == 2
    assert {r["backend"] for r in read_jsonl(ds.answers_file("memory_mem0_style"))} == {"offline"}

    with FakeOpenAIServer(api_key=TEST_KEY, responder=api_responder) as server:
        client = api_client(run_paths, server.url, tmp_path)
        ds, report = answer(run_paths, client)
        client.close()
        assert (report.answered, report.resumed) == (2, 0)  # the old behaviour kept both
        reads = [
            r
            for r in server.requests
            if r.path == CHAT_PATH
            and r.body["messages"][0]["content"].startswith("You answer a question")
        ]
        assert len(reads) == 2
        answers = load_answers(ds, "memory_mem0_style")
        assert set(answers["backend"]) == {"openai"} and len(answers) == 2
        assert set(answers["answer"]) == {"Three times a week."}

        # the same settings again: nothing is asked, nothing appended
        lines = len(read_jsonl(ds.answers_file("memory_mem0_style")))
        client = api_client(run_paths, server.url, tmp_path)
        ds, report = answer(run_paths, client)
        client.close()
        assert (report.answered, report.resumed) == (0, 2)
        assert len(read_jsonl(ds.answers_file("memory_mem0_style"))) == lines == 4


def test_an_answer_counts_as_done_only_under_its_own_fingerprint(run_paths):
    ds = run_paths.dataset("locomo").ensure()
    record = {
        "question_id": "q1",
        "conversation_id": "c",
        "answer": "x",
        "model": "m",
        "backend": "offline",
        "prompt_version": "p@v1",
        "prompt_tokens": 1,
        "cached_prompt_tokens": 0,
        "completion_tokens": 1,
        "reasoning_tokens": 0,
        "latency_s": 0.0,
        "error": None,
    }
    with AnswerWriter(ds, "memory_mem0_style", "aaaa") as writer:
        writer.write(record)
    assert AnswerWriter(ds, "memory_mem0_style", "aaaa").pending(["q1"]) == []
    assert AnswerWriter(ds, "memory_mem0_style", "bbbb").pending(["q1"]) == ["q1"]
    assert read_jsonl(ds.answers_file("memory_mem0_style"))[0]["fingerprint"] == "aaaa"


def test_the_fingerprint_changes_with_backend_model_prompt_parameters_and_inputs(
    run_paths, tmp_path, monkeypatch
):
    monkeypatch.setenv("OPENAI_API_KEY", TEST_KEY)
    offline = make_client(run_paths, progress=False)
    data = tmp_path / "facts.parquet"
    facts = pd.DataFrame({"fact_id": ["u:f0", "u:f1"], "text": ["one", "two"]})
    facts.to_parquet(data, index=False)
    base = dict(stage="read", models=["m"], prompts=["p@v1"], parameters={"k": 1}, inputs=[data])
    first = fingerprint(client=offline, **base)
    assert fingerprint(client=offline, **base) == first
    with FakeOpenAIServer(api_key=TEST_KEY) as server:
        api = api_client(run_paths, server.url, tmp_path)
        assert fingerprint(client=api, **base) != first
        api.close()
    for change in ({"models": ["n"]}, {"prompts": ["p@v2"]}, {"parameters": {"k": 2}}):
        assert fingerprint(client=offline, **{**base, **change}) != first
    # the same rows written another way (what another pandas or pyarrow release does to the
    # bytes): the same input, nothing to redo
    facts.to_parquet(data, index=False, compression="zstd", row_group_size=1)
    assert fingerprint(client=offline, **base) == first
    facts.assign(text=["one", "three"]).to_parquet(data, index=False)
    assert fingerprint(client=offline, **base) != first


def test_a_changed_turn_rebuilds_that_users_memory_only(run_paths):
    turns = pd.concat([yoga_conversation("pair-1"), yoga_conversation("pair-2")], ignore_index=True)
    ds = run_paths.dataset("locomo").ensure()
    config = MemoryConfig(dataset="locomo")
    client = make_client(run_paths, progress=False)
    first = MemoryBuilder(client, ds, config).run(turns, ["pair-1", "pair-2"])
    assert sorted(first.built) == ["pair-1", "pair-2"]
    done = {u: read_done(ds, u) for u in ("pair-1", "pair-2")}
    assert done["pair-1"]["fingerprint"] != done["pair-2"]["fingerprint"]  # their turns differ

    again = MemoryBuilder(client, ds, config).run(turns, ["pair-1", "pair-2"])
    assert (again.built, sorted(again.resumed)) == ([], ["pair-1", "pair-2"])

    changed = turns.copy()
    row = changed.index[
        (changed["conversation_id"] == "pair-2")
        & (changed["text"].str.contains("yoga three times"))
    ][0]
    changed.loc[row, "text"] = "Quick news: I now go to yoga four times a week."
    rebuilt = MemoryBuilder(client, ds, config).run(changed, ["pair-1", "pair-2"])
    client.close()
    assert (rebuilt.built, rebuilt.resumed) == (["pair-2"], ["pair-1"])
    assert read_done(ds, "pair-1") == done["pair-1"]
    assert read_done(ds, "pair-2")["fingerprint"] != done["pair-2"]["fingerprint"]
    facts = read_facts(ds)
    texts = facts.loc[facts["conversation_id"] == "pair-2", "text"].str.cat(sep=" ")
    assert "four times" in texts and "three times" not in texts


def read_done(ds, user):
    return memory_files.read_done(ds, user)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_through_the_runner_a_changed_turn_rebuilds_that_user_only(tmp_path, capsys):
    from memcost.cli import main
    from memcost.io import read_json
    from memcost.paths import RunPaths

    run = RunPaths(tmp_path / "run")
    args = [
        "run",
        "--params",
        "smoke",
        "--run-name",
        str(run.root),
        "--datasets",
        "locomo",
        "--quiet",
    ]
    assert main([*args, "--steps", "00,01"]) == 0, capsys.readouterr().err[-2000:]
    ds = run.dataset("locomo")
    users = sorted(
        memory_files.read_done(ds, u)["conversation_id"]
        for u in pd.read_parquet(ds.conversations)["conversation_id"].unique()
    )
    assert len(users) >= 2
    before = {u: memory_files.read_done(ds, u) for u in users}
    turns = pd.read_parquet(ds.conversations)
    row = turns.index[turns["conversation_id"] == users[-1]][5]
    turns.loc[row, "text"] = turns.loc[row, "text"] + " I also moved to Lisbon last month."
    turns.to_parquet(ds.conversations, index=False)

    assert main([*args, "--steps", "01"]) == 0, capsys.readouterr().err[-2000:]
    metrics = read_json(ds.metrics / "01_extract_facts.json")["metrics"]
    assert (metrics["users_built"], metrics["users_resumed"]) == (1, len(users) - 1)
    for user in users[:-1]:
        assert memory_files.read_done(ds, user) == before[user]
    assert memory_files.read_done(ds, users[-1])["fingerprint"] != before[users[-1]]["fingerprint"]
    facts = read_facts(ds)
    assert facts.loc[facts["conversation_id"] == users[-1], "text"].str.contains("Lisbon").any()
