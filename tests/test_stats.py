"""Accuracy statistics: Wilson, the dialogue-cluster bootstrap, exact McNemar, vote summaries."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from scipy.stats import binomtest

from memcost import costs, stats

# Wilson 95% intervals as published tables give them (Newcombe 1998 style, 4 decimals).
KNOWN_WILSON = {
    (0, 10): (0.0, 0.2775),
    (5, 10): (0.2366, 0.7634),
    (10, 10): (0.7225, 1.0),
    (81, 100): (0.7222, 0.8749),
}


@pytest.mark.parametrize(("k", "n"), list(KNOWN_WILSON))
def test_wilson_matches_known_values_and_scipy(k, n):
    low, high = stats.wilson_interval(k, n)
    assert (round(low, 4), round(high, 4)) == KNOWN_WILSON[(k, n)]
    reference = binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
    assert low == pytest.approx(reference.low, abs=1e-12)
    assert high == pytest.approx(reference.high, abs=1e-12)


def test_wilson_edges():
    assert stats.wilson_interval(0, 10)[0] == 0.0 and stats.wilson_interval(10, 10)[1] == 1.0
    assert all(math.isnan(v) for v in stats.wilson_interval(0, 0))
    with pytest.raises(ValueError):
        stats.wilson_interval(11, 10)
    narrow, wide = stats.wilson_interval(50, 100, 0.90), stats.wilson_interval(50, 100, 0.99)
    assert wide[0] < narrow[0] and wide[1] > narrow[1]


def clustered(n_conversations: int = 40, per_conversation: int = 8, seed: int = 1):
    """Each conversation is all right or all wrong: the strongest possible clustering."""
    rng = np.random.default_rng(seed)
    fate = rng.random(n_conversations) < 0.6
    correct = np.repeat(fate, per_conversation)
    clusters = np.repeat([f"c{i}" for i in range(n_conversations)], per_conversation)
    return correct, clusters


def test_cluster_bootstrap_is_reproducible_with_its_seed():
    correct, clusters = clustered()
    first = stats.cluster_bootstrap_interval(correct, clusters, n_resamples=1000, seed=7)
    again = stats.cluster_bootstrap_interval(correct, clusters, n_resamples=1000, seed=7)
    other = stats.cluster_bootstrap_interval(correct, clusters, n_resamples=1000, seed=8)
    assert first == again
    assert first != other
    assert first[0] <= correct.mean() <= first[1]


def test_cluster_bootstrap_is_wider_than_the_naive_interval_when_questions_share_conversations():
    correct, clusters = clustered()
    k, n = int(correct.sum()), correct.size
    wilson = stats.wilson_interval(k, n)
    cluster = stats.cluster_bootstrap_interval(correct, clusters, seed=0)
    iid = stats.cluster_bootstrap_interval(correct, np.arange(n).astype(str), seed=0)
    width = lambda ci: ci[1] - ci[0]  # noqa: E731
    # 40 effective observations, not 320: about sqrt(8) times wider.
    assert width(cluster) > 2 * width(wilson)
    assert width(cluster) > 2 * width(iid)
    # One question per conversation: the cluster bootstrap is the ordinary one, close to Wilson.
    assert width(iid) == pytest.approx(width(wilson), rel=0.2)


def test_cluster_bootstrap_rejects_misaligned_input_and_handles_empty():
    with pytest.raises(ValueError):
        stats.cluster_bootstrap_interval([True, False], ["a"])
    assert all(math.isnan(v) for v in stats.cluster_bootstrap_interval([], []))


def test_mcnemar_exact_on_a_hand_table():
    # memory right / LC wrong on 1 question, the reverse on 6, 10 concordant.
    a = [True] * 1 + [False] * 6 + [True] * 7 + [False] * 3
    b = [False] * 1 + [True] * 6 + [True] * 7 + [False] * 3
    result = stats.mcnemar_exact(a, b)
    assert (result.n, result.both_correct, result.a_only, result.b_only, result.both_wrong) == (
        17,
        7,
        1,
        6,
        3,
    )
    assert result.p_value == pytest.approx(0.125)  # 2 * (1 + 7) / 2**7
    assert result.p_value == pytest.approx(binomtest(1, 7, 0.5).pvalue)
    eleven = stats.mcnemar_exact([True] * 2 + [False] * 9, [False] * 2 + [True] * 9)
    assert eleven.p_value == pytest.approx(binomtest(2, 11, 0.5).pvalue)
    assert stats.mcnemar_exact([True, False], [True, False]).p_value == 1.0
    assert stats.mcnemar_exact([True] * 5, [False] * 5).p_value == pytest.approx(2 / 32)


HAND_VOTES = {
    "q1": ["CORRECT", "CORRECT", "WRONG"],
    "q2": ["WRONG", "WRONG", "CORRECT"],
    "q3": ["CORRECT", "WRONG", "UNJUDGED"],  # a tie among judged votes: no majority
    "q4": ["UNJUDGED", "UNJUDGED", "UNJUDGED"],
    "q5": ["CORRECT", "CORRECT", "CORRECT"],
}


def hand_judgments() -> pd.DataFrame:
    return pd.DataFrame(
        [
            {"system": "memory_mem0_style", "question_id": q, "vote": v, "label": label}
            for q, labels in HAND_VOTES.items()
            for v, label in enumerate(labels)
        ]
    )


def test_majority_and_mean_over_votes_on_hand_made_votes():
    votes = stats.majority_votes(hand_judgments(), ["system", "question_id"]).set_index(
        "question_id"
    )
    assert votes["label"].to_dict() == {
        "q1": "CORRECT",
        "q2": "WRONG",
        "q3": "WRONG",
        "q4": "UNJUDGED",
        "q5": "CORRECT",
    }
    assert votes["votes"].tolist() == [3, 3, 2, 0, 3]
    judged = votes.loc[votes["judged"]]
    assert judged["correct"].mean() == 0.5  # majority accuracy over the 4 judged questions

    per_vote = stats.vote_accuracies(hand_judgments(), ["system"])
    assert per_vote["accuracy"].tolist() == pytest.approx([3 / 4, 2 / 4, 2 / 3])
    spread = stats.mean_std_over_votes(hand_judgments(), ["system"]).iloc[0]
    accuracies = np.array([3 / 4, 2 / 4, 2 / 3])
    assert spread["vote_mean"] == pytest.approx(accuracies.mean())  # 0.639, not the majority 0.5
    assert spread["vote_std"] == pytest.approx(accuracies.std())
    assert spread["n_votes"] == 3


def test_usage_majority_counts_only_the_primary_prompt(tmp_path):
    rows = []
    for prompt, primary, label in (("judge", True, "WRONG"), ("judge_lenient", False, "CORRECT")):
        for vote in range(3):
            rows.append(
                {
                    "question_id": "q1",
                    "conversation_id": "c",
                    "system": "memory_mem0_style",
                    "vote": vote,
                    "label": label,
                    "prompt_name": prompt,
                    "primary": primary,
                }
            )
    folder = tmp_path / "run" / "locomo"
    (folder / "data").mkdir(parents=True)
    pd.DataFrame({"question_id": ["q1"]}).to_parquet(folder / "data" / "questions.parquet")
    (folder / "judgments.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    votes = costs.majority_votes(costs.run_judgments([tmp_path / "run"]))
    assert len(votes) == 1 and not votes["correct"].iloc[0] and votes["votes"].iloc[0] == 3


def test_the_rank_sum_counts_ties_as_a_half():
    assert stats.mann_whitney_u([3.0], [1.0, 2.0, 3.0]) == 2.5  # two larger, one tie
