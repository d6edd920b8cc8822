"""Model registry and the lexical utilities behind the offline methods."""

from __future__ import annotations

import subprocess
import sys

import pytest

from memcost import catalog, prompts, text


@pytest.mark.parametrize(
    ("model", "canonical", "slug", "gpt5"),
    [
        ("gpt-5-mini-2025-08-07", "gpt-5-mini", "gpt-5-mini", True),
        ("openai/gpt-oss-120b", "gpt-oss-120b", "gpt-oss-120b", False),
        ("gpt-5-nano", "gpt-5-nano", "gpt-5-nano", True),
        ("text-embedding-3-small", "text-embedding-3-small", "text-embedding-3-small", False),
    ],
)
def test_model_names(model, canonical, slug, gpt5):
    assert catalog.canonical_name(model) == canonical
    assert catalog.slug(model) == slug
    assert (catalog.is_known(model) and catalog.model_info(model).family == "gpt-5") is gpt5


def test_context_limits_and_unknown_model():
    assert catalog.model_info("gpt-5-mini-2025-08-07").prompt_limit == 272_000
    assert catalog.model_info("openai/gpt-oss-120b").context_window == 131_072
    assert catalog.model_info("text-embedding-3-small").embedding_dims == 1536
    with pytest.raises(KeyError, match="unknown model 'claude-x'.*memcost/assets/models.yaml"):
        catalog.model_info("claude-x")


def test_token_f1_and_containment():
    assert text.token_f1("The 7th of May", "7th May") == pytest.approx(0.8)  # "of" is extra
    assert text.token_f1("Paris", "London") == 0.0
    assert text.token_f1("in Paris, France", "Paris") == pytest.approx(0.5)  # P = 1/3, R = 1
    assert text.containment("three times a week", "She does yoga three times a week.") == 1.0
    assert text.containment("three times a week", "twice a week") == pytest.approx(1 / 3)


def test_sentences_and_words():
    assert text.split_sentences("I moved to Berlin. My sister's name is Ana! Cool?") == [
        "I moved to Berlin.",
        "My sister's name is Ana!",
        "Cool?",
    ]
    assert text.words("Caroline's 3 dogs") == ["caroline's", "3", "dogs"]
    assert "not" in text.content_words("I do not like it")


def test_bm25_prefers_the_matching_document():
    docs = ["Melanie painted a sunrise in 2022.", "Caroline went to a support group.", ""]
    bm25 = text.BM25(docs)
    assert bm25.best("When did Melanie paint a sunrise?")[0] == 0
    assert bm25.best("support group")[0] == 1
    assert bm25.best("zebra") is None


def test_stable_hash_is_stable_across_processes():
    code = "from memcost.text import stable_hash; print(stable_hash('yoga twice a week'))"
    runs = {
        subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            env={"PYTHONHASHSEED": seed},
        ).stdout
        for seed in ("1", "2")
    }
    assert runs == {f"{text.stable_hash('yoga twice a week')}\n"}


def test_prompt_fields_are_checked():
    p = prompts.Prompt("demo", "v1", "You answer.", "Q: {question}\nDate: {date}")
    assert p.id == "demo@v1"
    assert p.messages(question="Where?", date="2023-05-08") == (
        ("system", "You answer."),
        ("user", "Q: Where?\nDate: 2023-05-08"),
    )
    with pytest.raises(KeyError, match="missing fields \\['date'\\]"):
        p.messages(question="Where?")
