"""Answer files: names, schema, resume after a crash, clear errors."""

from __future__ import annotations

import pytest

from memcost import answers
from memcost.io import read_jsonl


def _record(qid: str, **extra):
    base = dict(question_id=qid, conversation_id="c1", answer="Paris", model="gpt-5-mini",
                backend="offline", prompt_version="read@v1", prompt_tokens=10,
                cached_prompt_tokens=0, completion_tokens=2, reasoning_tokens=0, latency_s=0.01,
                error=None)
    return {**base, **extra}


def test_system_names():
    assert answers.system_name("memory") == "memory"
    assert answers.system_name("long_context", "gpt-5-mini-2025-08-07") == "long_context_gpt-5-mini"
    assert answers.system_name("oracle", "openai/gpt-oss-120b") == "oracle_gpt-oss-120b"
    assert answers.system_kind("rolling_window_gpt-5-mini") == "rolling_window"
    with pytest.raises(ValueError, match="needs a model"):
        answers.system_name("no_context")
    with pytest.raises(ValueError, match="not a system name"):
        answers.system_kind("longcontext")


def test_writer_resumes_without_duplicates(run_paths):
    ds = run_paths.dataset("locomo").ensure()
    with answers.AnswerWriter(ds, "memory") as out:
        assert out.pending(["q1", "q2", "q3"]) == ["q1", "q2", "q3"]
        out.write(_record("q1"))
        out.write(_record("q2"))
    with answers.AnswerWriter(ds, "memory") as out:  # a rerun after a crash
        assert out.pending(["q1", "q2", "q3"]) == ["q3"]
        out.write(_record("q2"))  # already there: ignored
        out.write(_record("q3", answer="Rome"))
    # the file itself holds each question once (the loader would hide a duplicate)
    assert [r["question_id"] for r in read_jsonl(ds.answers_file("memory"))] == ["q1", "q2", "q3"]
    frame = answers.load_answers(ds, "memory")
    assert frame["question_id"].tolist() == ["q1", "q2", "q3"]
    assert frame.loc[2, "answer"] == "Rome"
    assert answers.answer_systems(ds) == ["memory"]


def test_incomplete_record_is_rejected(run_paths):
    ds = run_paths.dataset("locomo").ensure()
    record = _record("q1")
    del record["latency_s"]
    with answers.AnswerWriter(ds, "memory") as out, pytest.raises(ValueError, match="latency_s"):
        out.write(record)


def test_missing_file_names_the_notebook(run_paths):
    ds = run_paths.dataset("longmemeval").ensure()
    with pytest.raises(FileNotFoundError, match="03_answer_long_context.ipynb"):
        answers.load_answers(ds, "long_context_gpt-5-mini")
    with pytest.raises(FileNotFoundError, match="02_answer_from_memory.ipynb"):
        answers.load_answers(ds, "memory")


def test_systems_sorted_memory_first(run_paths):
    ds = run_paths.dataset("locomo").ensure()
    for system in ("oracle_gpt-5-mini", "long_context_gpt-oss-120b", "memory",
                   "long_context_gpt-5-mini"):
        with answers.AnswerWriter(ds, system) as out:
            out.write(_record("q1"))
    assert answers.answer_systems(ds) == [
        "memory", "long_context_gpt-5-mini", "long_context_gpt-oss-120b", "oracle_gpt-5-mini"]
