"""The bundled samples: reproducible from their generator, native in layout, and rich enough
that a system which finds the right turn beats one that does not."""

from __future__ import annotations

import csv
import importlib.util
import json
from collections import Counter

import pytest

from memcost import data
from memcost.data.locomo import load_locomo, parse_locomo_datetime
from memcost.data.longmemeval import LONGMEMEVAL_TYPES
from memcost.paths import REPO_ROOT, SAMPLE_DIR
from memcost.text import BM25, content_words, normalize_answer


def _load_generator():
    """``scripts/make_samples.py``, the development-time generator (not part of the package)."""
    path = REPO_ROOT / "scripts" / "make_samples.py"
    spec = importlib.util.spec_from_file_location("make_samples", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


samples = _load_generator()


@pytest.fixture(scope="module")
def rendered() -> dict[str, bytes]:
    return samples.render_files()


def test_committed_samples_equal_the_generator_output(rendered):
    on_disk = {
        str(p.relative_to(SAMPLE_DIR)): p.read_bytes()
        for p in sorted(SAMPLE_DIR.rglob("*"))
        if p.is_file()
    }
    assert sorted(on_disk) == sorted(rendered), "run `python scripts/make_samples.py`"
    for name, payload in rendered.items():
        assert on_disk[name] == payload, f"{name} differs from `python scripts/make_samples.py`"


def test_generator_is_deterministic_and_seeded(tmp_path, rendered):
    assert samples.render_files() == rendered
    other = samples.render_files(seed=1)
    assert other["locomo/locomo10.json"] != rendered["locomo/locomo10.json"]
    written = samples.write_samples(tmp_path, seed=1)
    assert {str(p.relative_to(tmp_path)) for p in written} == set(other)
    assert load_locomo(tmp_path / "locomo" / "locomo10.json").questions.shape[0] == 33


def test_locomo_sample_is_native(rendered):
    obj = json.loads(rendered["locomo/locomo10.json"])
    assert isinstance(obj, list) and len(obj) == 2
    for sample in obj:
        assert set(sample) == {
            "sample_id",
            "conversation",
            "qa",
            "event_summary",
            "observation",
            "session_summary",
        }
        conversation = sample["conversation"]
        sessions = [
            k for k in conversation if k.startswith("session_") and not k.endswith("_date_time")
        ]
        assert len(sessions) == 6 and {"speaker_a", "speaker_b"} <= set(conversation)
        for key in sessions:
            parse_locomo_datetime(conversation[f"{key}_date_time"])
            for k, turn in enumerate(conversation[key], start=1):
                assert turn["dia_id"] == f"D{key.split('_')[1]}:{k}"
                assert {"speaker", "dia_id", "text"} <= set(turn)
                assert set(turn) - {"speaker", "dia_id", "text"} in (
                    set(),
                    {"img_url", "blip_caption", "query"},
                )
        categories = Counter(q["category"] for q in sample["qa"])
        assert set(categories) == {1, 2, 3, 4, 5}
        for q in sample["qa"]:
            if q["category"] == 5:
                assert "answer" not in q and q["adversarial_answer"]
            else:
                assert "answer" in q and "adversarial_answer" not in q
    assert any(isinstance(q.get("answer"), int) for s in obj for q in s["qa"])


def test_longmemeval_sample_covers_every_type(rendered):
    s_file = json.loads(rendered["longmemeval/longmemeval_s_cleaned.json"])
    assert 8 <= len(s_file) <= 12
    assert {q["question_type"] for q in s_file} == set(LONGMEMEVAL_TYPES)
    assert sum(q["question_id"].endswith("_abs") for q in s_file) >= 2
    for q in s_file:
        assert set(q) == {
            "question_id",
            "question_type",
            "question",
            "answer",
            "question_date",
            "haystack_session_ids",
            "haystack_dates",
            "haystack_sessions",
            "answer_session_ids",
        }
        assert 4 <= len(q["haystack_sessions"]) <= 6
        assert q["haystack_dates"] == sorted(q["haystack_dates"])
        assert q["question_date"] > q["haystack_dates"][-1]
        for session_id, session in zip(
            q["haystack_session_ids"], q["haystack_sessions"], strict=True
        ):
            if any(t.get("has_answer") for t in session):  # evidence turns sit in answer sessions
                assert session_id in q["answer_session_ids"]
        assert any(t.get("has_answer") for s in q["haystack_sessions"] for t in s)
    oracle = json.loads(rendered["longmemeval/longmemeval_oracle.json"])
    assert [q["question_id"] for q in oracle] == [q["question_id"] for q in s_file]
    for o, s in zip(oracle, s_file, strict=True):
        assert sorted(o["haystack_session_ids"]) == sorted(s["answer_session_ids"])


def test_knowledge_update_needs_the_later_value():
    loaded = data.load(data.resolve_source("longmemeval"))
    q = loaded.questions[loaded.questions["question"].str.contains("yoga")].iloc[0]
    assert q["category"] == "knowledge-update" and q["answer"] == "Three times a week"
    turns = loaded.conversation(q["conversation_id"])
    evidence = turns[turns["has_answer"]]
    assert "twice a week" in evidence.iloc[0]["text"]
    assert "three times a week" in evidence.iloc[-1]["text"]
    assert evidence.iloc[0]["session_datetime"] < evidence.iloc[-1]["session_datetime"]


def test_personamem_sample_is_native(rendered):
    rows = list(
        csv.DictReader(
            rendered["personamem_v2/benchmark/text/benchmark.csv"]
            .decode("utf-8")
            .splitlines(keepends=True)
        )
    )
    assert len(rows) == 12 and len({r["persona_id"] for r in rows}) == 3
    assert list(rows[0]) == samples.PERSONAMEM_COLUMNS
    for row in rows:
        incorrect = json.loads(row["incorrect_answers"])
        assert len(incorrect) == 3 and row["correct_answer"] not in incorrect
        assert f"personamem_v2/{row['chat_history_32k_link']}" in rendered
        assert f"personamem_v2/{row['chat_history_128k_link']}" in rendered
        if row["updated"] == "True":
            assert row["prev_pref"]
    assert {r["pref_type"] for r in rows} >= {"ask_to_forget", "sensitive_info"}
    history = json.loads(rendered["personamem_v2/data/chat_history_32k/chat_history_persona0.json"])
    assert set(history) == {"metadata", "chat_history"}
    assert history["chat_history"][0]["role"] == "system"
    longer = json.loads(rendered["personamem_v2/data/chat_history_128k/chat_history_persona0.json"])
    assert len(longer["chat_history"]) > len(history["chat_history"])


def _locomo_hit_rate(k: int) -> tuple[float, float]:
    """Share of answerable LoCoMo questions whose evidence is among the top-k turns by BM25,
    and the share whose gold answer could be read off the question alone."""
    loaded = data.load(data.resolve_source("locomo"))
    hits = guessable = total = 0
    for conversation_id, turns in loaded.conversations.groupby("conversation_id"):
        index = BM25(turns["text"].tolist())
        dia_ids = turns["dia_id"].tolist()
        questions = loaded.questions[
            (loaded.questions["conversation_id"] == conversation_id)
            & ~loaded.questions["is_abstention"]
        ]
        for q in questions.itertuples():
            scores = index.scores(q.question)
            top = sorted(range(len(scores)), key=lambda i: -scores[i])[:k]
            hits += bool({dia_ids[i] for i in top} & set(q.evidence))
            answer_words = set(content_words(normalize_answer(q.answer)))
            guessable += bool(answer_words) and answer_words <= set(content_words(q.question))
            total += 1
    return hits / total, guessable / total


def test_retrieving_the_right_turn_is_possible_and_guessing_is_not():
    hit_rate, guessable = _locomo_hit_rate(k=5)
    assert hit_rate >= 0.6  # lexical retrieval finds the evidence for most questions...
    assert guessable <= 0.1  # ...and the answer is almost never in the question itself
