"""Answer files: names, schema, resume after a crash, clear errors."""

from __future__ import annotations

import pytest

from memcost import answers
from memcost.io import read_jsonl


def _record(qid: str, **extra):
    base = dict(
        question_id=qid,
        conversation_id="c1",
        answer="Paris",
        model="gpt-5-mini",
        backend="offline",
        prompt_version="read@v1",
        prompt_tokens=10,
        cached_prompt_tokens=0,
        completion_tokens=2,
        reasoning_tokens=0,
        latency_s=0.01,
        error=None,
    )
    return {**base, **extra}


def test_system_names():
    assert answers.system_name("long_context", "gpt-5-mini-2025-08-07") == "long_context_gpt-5-mini"
    assert answers.system_name("oracle", "openai/gpt-oss-120b") == "oracle_gpt-oss-120b"
    assert answers.system_kind("rolling_window_gpt-5-mini") == "rolling_window"
    with pytest.raises(ValueError, match="needs a model"):
        answers.system_name("no_context")
    with pytest.raises(ValueError, match="not a system name"):
        answers.system_kind("longcontext")
    with pytest.raises(ValueError, match="not a system name"):
        answers.system_kind("memory")  # the paper's is memory_mem0_style, as it is registered


def test_labels_name_models_online_and_never_offline():
    systems = [
        "memory_mem0_style",
        "memory_graph",
        "long_context_gpt-oss-120b",
        "long_context_gpt-5-mini",
        "rolling_window_gpt-5-mini",
    ]
    online = answers.system_labels(systems)
    assert online["long_context_gpt-5-mini"] == "long context, gpt-5-mini"
    assert online["memory_graph"] == "memory graph"
    offline = answers.system_labels(systems, offline=True)
    # numbered in the order of the names, whatever order they came in; alone, no number
    assert offline["long_context_gpt-5-mini"] == "long context (offline) 1"
    assert offline["long_context_gpt-oss-120b"] == "long context (offline) 2"
    assert offline["rolling_window_gpt-5-mini"] == "rolling window (offline)"
    # every offline row says so, the memory systems' too
    assert offline["memory_mem0_style"] == "memory mem0_style (offline)"
    assert online["memory_mem0_style"] == "memory mem0_style"
    assert offline["memory_graph"] == "memory graph (offline)"
    assert all("(offline)" in v for v in offline.values())
    assert not [v for v in offline.values() if "gpt" in v]
    assert len(set(offline.values())) == len(systems)
    assert answers.offline_places(systems) == {
        "long_context_gpt-5-mini": ("gpt-5-mini", 1),
        "long_context_gpt-oss-120b": ("gpt-oss-120b", 2),
    }


def test_offline_accuracy_figure_names_no_model():
    import pandas as pd

    from memcost.plots.study import plot_accuracy

    table3 = pd.DataFrame(
        {
            "system": ["memory_mem0_style", "long_context_gpt-5-mini", "long_context_gpt-oss-120b"],
            "n": 4,
            "accuracy": [0.5, 0.25, 0.25],
            "wilson_low": 0.1,
            "wilson_high": 0.9,
            "bootstrap_low": 0.2,
            "bootstrap_high": 0.8,
            "judge_model": "lexical",
        }
    )
    fig = plot_accuracy(table3, pd.DataFrame(), dataset="locomo", backend="offline")
    legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert legend == [
        "memory mem0_style (offline)",
        "long context (offline) 1",
        "long context (offline) 2",
    ]
    fig = plot_accuracy(table3, pd.DataFrame(), dataset="locomo", backend="openai")
    assert "long context, gpt-oss-120b" in [
        t.get_text() for t in fig.axes[0].get_legend().get_texts()
    ]


def test_writer_resumes_without_duplicates(run_paths):
    ds = run_paths.dataset("locomo").ensure()
    with answers.AnswerWriter(ds, "memory_mem0_style") as out:
        assert out.pending(["q1", "q2", "q3"]) == ["q1", "q2", "q3"]
        out.write(_record("q1"))
        out.write(_record("q2"))
    with answers.AnswerWriter(ds, "memory_mem0_style") as out:  # a rerun after a crash
        assert out.pending(["q1", "q2", "q3"]) == ["q3"]
        out.write(_record("q2"))  # already there: ignored
        out.write(_record("q3", answer="Rome"))
    # the file itself holds each question once (the loader would hide a duplicate)
    assert [r["question_id"] for r in read_jsonl(ds.answers_file("memory_mem0_style"))] == [
        "q1",
        "q2",
        "q3",
    ]
    frame = answers.load_answers(ds, "memory_mem0_style")
    assert frame["question_id"].tolist() == ["q1", "q2", "q3"]
    assert frame.loc[2, "answer"] == "Rome"
    assert answers.answer_systems(ds) == ["memory_mem0_style"]


def test_incomplete_record_is_rejected(run_paths):
    ds = run_paths.dataset("locomo").ensure()
    record = _record("q1")
    del record["latency_s"]
    with (
        answers.AnswerWriter(ds, "memory_mem0_style") as out,
        pytest.raises(ValueError, match="latency_s"),
    ):
        out.write(record)


def test_missing_file_names_the_notebook(run_paths):
    ds = run_paths.dataset("longmemeval").ensure()
    with pytest.raises(FileNotFoundError, match="03_answer_long_context.ipynb"):
        answers.load_answers(ds, "long_context_gpt-5-mini")
    with pytest.raises(FileNotFoundError, match="02_answer_from_memory.ipynb"):
        answers.load_answers(ds, "memory_mem0_style")


def test_systems_sorted_memory_first(run_paths):
    ds = run_paths.dataset("locomo").ensure()
    for system in (
        "oracle_gpt-5-mini",
        "long_context_gpt-oss-120b",
        "memory_mem0_style",
        "long_context_gpt-5-mini",
    ):
        with answers.AnswerWriter(ds, system) as out:
            out.write(_record("q1"))
    assert answers.answer_systems(ds) == [
        "memory_mem0_style",
        "long_context_gpt-5-mini",
        "long_context_gpt-oss-120b",
        "oracle_gpt-5-mini",
    ]
