"""The offline simulated prompt cache of notebook 03: its numbers follow from the one
prefix-cache rule (``memcost.catalog``), and everything it reports is labelled simulated."""

from __future__ import annotations

import random

import pandas as pd
import pytest

from memcost import catalog, longctx
from memcost.catalog import cacheable
from memcost.longctx.cache import PromptIds, prompt_token_ids
from memcost.longctx.plan import Planned

GPT5 = "gpt-5-mini-2025-08-07"
VOCAB = (
    "garden kettle harbour violin lantern meadow pottery ferry orchard canvas glacier "
    "bakery compass saddle marble quartz thistle ember willow falcon"
).split()


def conversation(cid: str, n_sessions: int, words: int) -> pd.DataFrame:
    """A conversation in notebook 00's schema, ``words`` words of varied prose per session."""
    rng = random.Random(cid)
    rows = []
    for s in range(n_sessions):
        for t in range(4):
            role = "user" if t % 2 == 0 else "assistant"
            text = f"s{s}t{t} " + " ".join(rng.choice(VOCAB) for _ in range(words // 4)) + "."
            rows.append(
                {
                    "conversation_id": cid,
                    "session_index": s,
                    "session_id": f"{cid}-s{s}",
                    "session_datetime": f"2023-05-{1 + s:02d}T10:{t:02d}:00",
                    "turn_index": t,
                    "position": len(rows),
                    "speaker": role,
                    "role": role,
                    "text": text,
                    "dia_id": f"D{s + 1}:{t + 1}",
                    "has_answer": False,
                    "image_caption": None,
                }
            )
    return pd.DataFrame(rows)


def questions(cid: str, k: int) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "question_id": [f"{cid}-q{i}" for i in range(k)],
            "conversation_id": [cid] * k,
            "question": [
                f"What did I say about the {VOCAB[i % len(VOCAB)]} ({i})?" for i in range(k)
            ],
            "answer": ["x"] * k,
            "question_date": [None] * k,
            "evidence": [[] for _ in range(k)],
            "options": [None] * k,
        }
    )


def plan(
    conversations: list[pd.DataFrame],
    asked: list[pd.DataFrame],
    kinds: tuple[str, ...] = ("long_context",),
) -> Planned:
    histories = longctx.build_histories(pd.concat(conversations, ignore_index=True))
    return longctx.plan_questions(
        pd.concat(asked, ignore_index=True),
        histories,
        models=[GPT5],
        baseline_models=[GPT5],
        kinds=list(kinds),
        window_turns=2,
        overflow="error",
        mode="open_ended",
        generation={},
    )


@pytest.fixture(scope="module")
def long_and_short() -> Planned:
    """``long``: 6 questions about a ~3k-token history; ``short``: 4 about a ~300-token one."""
    return plan(
        [conversation("long", 6, 400), conversation("short", 1, 160)],
        [questions("long", 6), questions("short", 4)],
    )


def test_prompt_ids_from_parts_equal_the_whole_prompts(long_and_short):
    ids = PromptIds()
    for p in long_and_short.plans:
        assert ids(p).tolist() == prompt_token_ids(p)
        assert len(ids(p)) == p.prompt_tokens


def test_k_questions_back_to_back_cache_k_minus_1_prefixes(long_and_short):
    plans = [p for p in long_and_short.plans if p.conversation_id == "long"]
    assert plans[0].prefix_tokens >= catalog.CACHED_INPUT_MIN_TOKENS
    steps = longctx.simulate_conversation(plans, gap_s=4.0)
    assert [s.position for s in steps] == [1, 2, 3, 4, 5, 6]
    assert [s.arrival_s for s in steps] == [0.0, 4.0, 8.0, 12.0, 16.0, 20.0]
    assert steps[0].cached_tokens == 0 and "first question" in steps[0].reason
    later = steps[1:]
    assert len([s for s in later if s.cached_tokens]) == len(plans) - 1
    for s in later:
        # the history is shared, the question block is not: the cache serves the shared
        # prefix rounded down to 1,024 + k x 128
        assert plans[0].prefix_tokens <= s.shared_tokens < s.prompt_tokens
        assert s.cached_tokens == cacheable(s.shared_tokens)
        assert s.cached_tokens % 128 == 0 and 0 <= s.shared_tokens - s.cached_tokens < 128
        assert s.reason.startswith(f"hit: {s.shared_tokens:,} shared tokens")


def test_a_prefix_under_1024_tokens_caches_nothing(long_and_short):
    plans = [p for p in long_and_short.plans if p.conversation_id == "short"]
    assert plans[0].prompt_tokens < catalog.CACHED_INPUT_MIN_TOKENS
    steps = longctx.simulate_conversation(plans, gap_s=4.0)
    assert [s.cached_tokens for s in steps] == [0, 0, 0, 0]
    assert "not remembered" in steps[0].reason
    assert all("under 1,024 tokens" in s.reason for s in steps[1:])


def test_retention_and_overflow_follow_the_rule():
    planned = plan([conversation("busy", 6, 400)], [questions("busy", 20)])
    # 700 s apart: each prefix is forgotten 600 s after its last use
    slow = longctx.simulate_conversation(planned.plans, gap_s=700.0)
    assert sum(s.cached_tokens for s in slow) == 0
    assert all("over the 600 s kept" in s.reason for s in slow[1:])
    # 2 s apart: 15 requests a minute per prefix; the 16th onwards overflow and miss
    fast = longctx.simulate_conversation(planned.plans, gap_s=2.0)
    assert [s.position for s in fast if s.cached_tokens] == list(range(2, 16))
    assert all("over 15 requests a minute" in s.reason for s in fast[15:])
    # the dispatcher's pace (4 s) stays under the limit: every later question hits
    paced = longctx.simulate_conversation(planned.plans, gap_s=longctx.cache.DEFAULT_GAP_S)
    assert all(s.cached_tokens for s in paced[1:])
    with pytest.raises(ValueError, match="gap_s"):
        longctx.simulate_conversation(planned.plans, gap_s=-1.0)


def test_batch_summary_is_the_sum_of_its_steps_and_labelled_simulated(long_and_short):
    steps = longctx.simulate_prompt_cache(long_and_short, gap_s=4.0)
    assert len(steps) == len(long_and_short.plans)
    by_conversation = steps.groupby("conversation_id")["simulated_cached_tokens"]
    assert by_conversation.apply(lambda s: int((s > 0).sum())).to_dict() == {"long": 5, "short": 0}
    summary = longctx.simulated_cache_summary(steps)
    row = summary.iloc[0]
    assert row["questions"] == 10 and row["later_questions"] == 8
    cached = int(steps["simulated_cached_tokens"].sum())
    assert row["simulated_cached_tokens"] == cached
    assert row["simulated_cached_share"] == pytest.approx(cached / steps["prompt_tokens"].sum())
    later = steps.loc[steps["position"] > 1]
    assert row["simulated_share_after_first"] == pytest.approx(
        cached / later["prompt_tokens"].sum()
    )
    assert row["source"].startswith("SIMULATED")


def test_a_conversation_asked_once_has_nothing_to_reuse(long_and_short):
    (plan_,) = [p for p in long_and_short.plans if p.conversation_id == "long"][:1]
    (step,) = longctx.simulate_conversation([plan_])
    assert (step.prompt_tokens, step.cached_tokens) == (plan_.prompt_tokens, 0)
    assert step.reason == "first question: nothing sent before it (remembered)"
