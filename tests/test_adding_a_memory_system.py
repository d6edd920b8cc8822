"""docs/adding-a-memory-system.md: its two code blocks run as written, and the system they
define behaves as the page says (registered by name, built offline, shown the last sessions)."""

from __future__ import annotations

import re

import pandas as pd
import pytest

import memcost.memory.base as base
from memcost import paths
from memcost.answers import load_answers
from memcost.memory.reader import answer_with_system
from memcost.paths import REPO_ROOT

PAGE = REPO_ROOT / "docs" / "adding-a-memory-system.md"


def blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", PAGE.read_text(encoding="utf-8"), re.DOTALL)


def test_the_pages_minimal_system_runs_as_written(tmp_path, monkeypatch, capsys):
    define, try_it = blocks()
    # registered into a copy of the registry (without the class of a reader who saved the page
    # as memcost/memory/last_sessions.py), and the run written under tmp_path
    registry = {n: c for n, c in base._REGISTRY.items() if n != "last_sessions"}
    monkeypatch.setattr(base, "_REGISTRY", registry)
    monkeypatch.setattr(paths, "RUNS_DIR", tmp_path / "runs")
    namespace: dict = {"__name__": "last_sessions_example"}
    exec(compile(define, str(PAGE), "exec"), namespace)
    assert base.system_class("last_sessions").describes.startswith("the last few sessions")
    with pytest.raises(ValueError, match=r"unknown setting\(s\) \['k'\]; its settings are"):
        base.parse_systems([{"last_sessions": {"k": 3}}])
    exec(compile(try_it, str(PAGE), "exec"), namespace)
    out = capsys.readouterr().out
    assert "built=2" in out and "failed={}" in out
    sample, recalls = namespace["sample"], namespace["recalls"]
    assert set(recalls) == set(sample.questions["question_id"])
    for question in sample.questions.itertuples():
        shown = recalls[question.question_id].items
        turns = sample.conversations[
            sample.conversations["conversation_id"] == question.conversation_id
        ]
        last = int(pd.to_numeric(turns["session_index"]).max())
        # one item, the user's last session, every message of it
        assert list(shown["item_id"]) == [f"s{last}"] and list(shown["kind"]) == ["session"]
        session = turns[turns["session_index"] == last]
        assert all(str(t) in shown["text"].iloc[0] for t in session["text"])
    assert (tmp_path / "runs" / "try-last-sessions" / "locomo").is_dir()
    # notebook 02's call: the page's system answers under its answers_as name, which has an
    # underscore of its own (it was refused as "not a system name" once)
    answered = answer_with_system(
        namespace["client"], namespace["system"], sample.questions, sample.conversations
    )
    assert answered.errors == 0 and answered.answered == len(sample.questions)
    answers = load_answers(namespace["ds"], "memory_last_sessions")
    assert sorted(answers["question_id"]) == sorted(sample.questions["question_id"])
    assert set(answers["system"]) == {"memory_last_sessions"}


def test_a_system_whose_answers_as_no_record_could_carry_is_refused_when_registered(monkeypatch):
    monkeypatch.setattr(base, "_REGISTRY", dict(base._REGISTRY))

    class Bad(base.MemorySystem):
        name = "bad"
        answers_as = "Bad-Memory"

    with pytest.raises(ValueError, match=r"memory system 'bad': answers_as must be 'memory_'"):
        base.register(Bad)
    assert "bad" not in base.system_names()
