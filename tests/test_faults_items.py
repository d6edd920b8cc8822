"""A failed item is never a finished item: through the real client against the local server,
a failed segment keeps its user unfinished, the stage's status counts it, and a resume sends
exactly the failed calls again."""

from __future__ import annotations

import pandas as pd
import pytest
from fake_api.openai_server import CHAT_PATH, Action, FakeOpenAIServer
from llm_helpers import TEST_KEY, api_client, question
from test_memory import api_responder, yoga_conversation

from memcost.io import read_json, read_jsonl
from memcost.memory import facts as memory_files
from memcost.memory.mem0_style import MemoryBuilder, MemoryConfig
from memcost.run.checks import (
    COMPLETE,
    FAILED,
    WITH_FAILURES,
    StageFailures,
    check_failures,
    record_status,
)
from memcost.run.presets import PresetError, check_fraction
from memcost.run.report.page import failure_lines


def is_extract(path: str, body: dict) -> bool:
    return path == CHAT_PATH and body["messages"][0]["content"].startswith(
        "You keep the long-term memory"
    )


@pytest.fixture
def server(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", TEST_KEY)
    with FakeOpenAIServer(api_key=TEST_KEY, responder=api_responder) as srv:
        yield srv


def build(run, client):
    ds = run.dataset("locomo").ensure()
    turns = pd.concat([yoga_conversation("pair-1"), yoga_conversation("pair-2")])
    builder = MemoryBuilder(client, ds, MemoryConfig(dataset="locomo"))
    return ds, builder.run(turns, ["pair-1", "pair-2"])


def test_an_outage_leaves_users_unfinished_and_a_resume_builds_them(run_paths, server, tmp_path):
    # every extraction answered 500: the four segments fail after their retries
    server.on(is_extract, Action(status=500, retry_after_ms=1), times=None)
    client = api_client(run_paths, server.url, tmp_path, max_consecutive_failures=50)
    ds, report = build(run_paths, client)
    client.close()
    assert report.failed_segments == 4 and report.incomplete == ["pair-1", "pair-2"]
    for user in ("pair-1", "pair-2"):
        assert memory_files.read_done(ds, user) is None
        assert memory_files.read_incomplete(ds, user)["failed_segments"] == 2
    status = record_status(run_paths, "01_extract_facts", "locomo")
    assert (status.status, status.failed, status.total) == (FAILED, 4, 4)
    assert "500" in status.errors[0]
    with pytest.raises(StageFailures, match="4 of 4 segments failed"):
        check_failures([status], 0.0)
    check_failures([status], 1.0)  # allow_failures=1 lets everything fail
    manifest = read_json(run_paths.manifest)
    assert failure_lines(manifest)[0].startswith("**01_extract_facts [LoCoMo]**: failed, 4 of 4")

    server.clear()  # the server is back
    client = api_client(run_paths, server.url, tmp_path, max_consecutive_failures=50)
    ds, report = build(run_paths, client)
    client.close()
    assert report.built == ["pair-1", "pair-2"] and report.resumed == []
    assert report.failed_segments == 0 and report.candidates > 0
    assert all(memory_files.read_done(ds, u) for u in ("pair-1", "pair-2"))
    assert memory_files.read_incomplete(ds, "pair-1") is None
    # the two users' segments are the same requests: each failed one sent again, once
    assert sum(is_extract(r.path, r.body) for r in server.requests) == 2
    status = record_status(run_paths, "01_extract_facts", "locomo")
    assert (status.status, status.failed) == (COMPLETE, 0)
    metrics_path = ds.metrics / "01_extract_facts.json"
    assert not failure_lines(read_json(run_paths.manifest))
    assert not metrics_path.exists() or read_json(metrics_path)["status"] == COMPLETE


def test_a_small_stage_whose_first_calls_all_fail_stops(run_paths, server, tmp_path):
    server.on(is_extract, Action(status=500, retry_after_ms=1), times=None)
    client = api_client(run_paths, server.url, tmp_path)  # in-a-row limit: 20 calls
    turns = pd.concat([yoga_conversation(f"p{i}") for i in range(3)])
    ds = run_paths.dataset("locomo").ensure()
    builder = MemoryBuilder(client, ds, MemoryConfig(dataset="locomo"))
    with pytest.raises(Exception, match="first 5 extract calls .* all failed"):
        builder.run(turns, ["p0", "p1", "p2"])
    client.close()
    assert not list((ds.memory / "users").glob("*/done.json"))


def test_one_failed_segment_of_four_is_complete_with_failures(run_paths, server, tmp_path):
    server.on(
        lambda p, b: (
            is_extract(p, b)
            and "three times" in b["messages"][1]["content"]
            and "pair-2" not in str(b)
        ),
        Action(status=500, retry_after_ms=1),
        times=4,
    )
    client = api_client(run_paths, server.url, tmp_path)
    ds, report = build(run_paths, client)
    client.close()
    status = record_status(run_paths, "01_extract_facts", "locomo")
    assert status.status == WITH_FAILURES and (status.failed, status.total) == (1, 4)
    with pytest.raises(StageFailures):
        check_failures([status], 0.2)
    check_failures([status], 0.25)


@pytest.mark.parametrize("value", ["ten", -0.1, 1.5, True])
def test_allow_failures_must_be_a_fraction(value):
    with pytest.raises(PresetError, match="expected a fraction from 0 to 1"):
        check_fraction(value, "allow_failures")


def answer(qid: str, error: str | None) -> dict:
    return {
        "question_id": qid,
        "conversation_id": "c",
        "answer": "" if error else "x",
        "model": "m",
        "backend": "openai",
        "prompt_version": "p@v1",
        "prompt_tokens": 1,
        "cached_prompt_tokens": 0,
        "completion_tokens": 1,
        "reasoning_tokens": 0,
        "latency_s": 0.0,
        "error": error,
    }


def test_failed_answers_and_votes_are_counted_and_open_the_report(run_paths):
    from memcost.answers import AnswerWriter, judgment_record, rewrite_judgments
    from memcost.run.report import render_markdown

    ds = run_paths.dataset("locomo").ensure()
    with AnswerWriter(ds, "memory_mem0_style", "fp") as writer:
        writer.write(answer("q1", None))
        writer.write(answer("q2", "HTTP 500 (gave up after 6 attempts)"))
    assert AnswerWriter(ds, "memory_mem0_style", "fp").pending(["q1", "q2"]) == ["q2"]  # retried
    with AnswerWriter(ds, "long_context_gpt-5-mini", "fp") as writer:
        writer.write(answer("q1", None))
    votes = [
        judgment_record(
            question_id="q1",
            system="memory_mem0_style",
            vote=v,
            label="CORRECT",
            backend="openai",
            primary=True,
        )
        for v in range(2)
    ]
    votes.append(
        judgment_record(
            question_id="q1",
            system="memory_mem0_style",
            vote=2,
            label="UNJUDGED",
            reason="judge failed: timeout",
            backend="openai",
            unjudged_cause="judge",
            primary=True,
        )
    )
    rewrite_judgments(ds.judgments, votes)

    read = record_status(run_paths, "02_answer_from_memory", "locomo")
    assert (read.status, read.failed, read.total, read.item) == (WITH_FAILURES, 1, 2, "answers")
    assert read.errors == ("HTTP 500 (gave up after 6 attempts)",)
    long = record_status(run_paths, "03_answer_long_context", "locomo")
    assert (long.status, long.failed, long.total) == (COMPLETE, 0, 1)
    judged = record_status(run_paths, "04_judge_answers", "locomo")
    assert (judged.failed, judged.total, judged.item) == (1, 3, "judge votes")

    report = render_markdown(run_paths)
    # right under the title, before the first section
    assert 0 < report.index("> **Failures: this run is not complete.**") < report.index("\n## ")
    assert "02_answer_from_memory [LoCoMo]**: complete with failures, 1 of 2 answers" in report
    assert "04_judge_answers [LoCoMo]**: complete with failures, 1 of 3 judge votes" in report
    assert "03_answer_long_context" not in report.split("## ")[0]
    assert "Failed items are never recorded as finished" in report  # items, not a notebook


def test_a_notebook_that_stopped_the_run_is_named_with_its_cell_and_what_never_ran():
    manifest = {
        "preset": {"steps": ["02", "03", "04", "05"]},
        "notebooks": {
            "locomo/01_extract_facts": {"status": "ok"},
            "locomo/02_answer_from_memory": {
                "status": "failed",
                "error": "cell 4: ArrowInvalid: facts.parquet is not a parquet file.",
            },
        },
    }
    assert failure_lines(manifest) == [
        "**02_answer_from_memory [LoCoMo]**: the notebook failed in cell 4: ArrowInvalid: "
        "facts.parquet is not a parquet file; the notebooks after it did not run",
        "never ran: notebooks 03, 04, 05",
    ]


def test_items_the_endpoint_refuses_are_failed_items_not_an_outage(run_paths, server, tmp_path):
    # a resume whose only calls left are items refused for good (400 on each) must not read
    # as "the endpoint seems unavailable": the endpoint answered every one of them
    server.on(
        lambda path, body: path == CHAT_PATH,
        Action(status=400, error_code="invalid_prompt", message="Invalid prompt: flagged"),
        times=None,
    )
    client = api_client(run_paths, server.url, tmp_path)
    results = client.chat_many([question(i) for i in range(8)])
    client.close()
    assert [r.failure_kind for r in results] == ["rejected"] * 8
    assert server.count(CHAT_PATH, status=400) == 8


def is_update(path: str, body: dict) -> bool:
    return path == CHAT_PATH and body["messages"][0]["content"].startswith(
        "You keep a personal assistant's long-term memory consistent"
    )


def active_facts(ds, user):
    facts = pd.read_parquet(ds.memory / "users" / user / "facts.parquet")
    return sorted(facts.loc[facts["status"] == "active", "text"])


@pytest.mark.parametrize(
    "action",
    [
        Action(status=500, retry_after_ms=1),
        Action(status=400, error_code="invalid_prompt", message="Invalid prompt: flagged"),
    ],
    ids=["outage", "refused"],
)
def test_a_failed_update_call_is_a_failed_segment_not_an_add(run_paths, server, tmp_path, action):
    # the update phase of pair-1's second segment fails after its retries: that segment is a
    # failed item (its user unfinished, the stage counts it), never "ADD every candidate"
    server.on(lambda p, b: is_update(p, b) and "pair-2" not in str(b), action, times=None)
    client = api_client(run_paths, server.url, tmp_path, max_consecutive_failures=50)
    ds, report = build(run_paths, client)
    client.close()
    assert report.failed_segments == 1 and report.incomplete == ["pair-1"]
    assert memory_files.read_done(ds, "pair-1") is None
    assert memory_files.read_incomplete(ds, "pair-1")["failed_segments"] == 1
    segments = pd.read_parquet(ds.memory / "users" / "pair-1" / "segments.parquet")
    failed = segments.loc[segments["status"] == "failed"]
    assert failed["segment_index"].tolist() == [1]
    assert failed["error"].iloc[0].startswith("update phase: ")
    # nothing of the failed segment reached the memory: no stale "three times" ADD beside
    # "twice a week", and no decision recorded for it
    assert active_facts(ds, "pair-1") == [
        "Ana goes to yoga twice a week.",
        "Ben has a beagle named Pretzel.",
    ]
    updates = read_jsonl(ds.memory / "users" / "pair-1" / "updates.jsonl")
    assert all(u["segment_index"] == 0 for u in updates)
    status = record_status(run_paths, "01_extract_facts", "locomo")
    assert (status.status, status.failed, status.total) == (WITH_FAILURES, 1, 4)
    with pytest.raises(StageFailures, match="1 of 4 segments failed"):
        check_failures([status], 0.0)

    server.clear()  # the endpoint answers again: the resume repairs pair-1's memory
    client = api_client(run_paths, server.url, tmp_path, max_consecutive_failures=50)
    ds, report = build(run_paths, client)
    client.close()
    assert report.built == ["pair-1"] and report.resumed == ["pair-2"]
    assert report.failed_segments == 0 and memory_files.read_done(ds, "pair-1")
    assert (
        active_facts(ds, "pair-1")
        == active_facts(ds, "pair-2")
        == [
            "Ana goes to yoga three times a week (twice a week until April 2023).",
            "Ben has a beagle named Pretzel.",
        ]
    )
    assert record_status(run_paths, "01_extract_facts", "locomo").status == COMPLETE


def test_one_conversation_is_one_conversation():
    from types import SimpleNamespace

    from memcost.run.report.headline import interval_note

    assert interval_note(SimpleNamespace(conversations=1)) == " ⚠ 1 conversation"
    assert interval_note(SimpleNamespace(conversations=2)) == " ⚠ 2 conversations"
    assert interval_note(SimpleNamespace(conversations=10)) == ""
