"""LoCoMo subset selection, accuracy from judgments, pricing and the study's tables."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from memcost_serving import analysis, systems, workload


def questions(spec: dict[str, list[tuple[int, list[str]]]]) -> pd.DataFrame:
    rows = []
    for conv, items in spec.items():
        for i, (category, evidence) in enumerate(items):
            rows.append(
                {
                    "question_id": f"{conv}-{i}",
                    "conversation_id": conv,
                    "category_id": category,
                    "evidence": evidence,
                }
            )
    return pd.DataFrame(rows)


TYPICAL = [(1, ["D1:1"]), (2, ["D1:1", "D2:3"]), (4, ["D1:2"]), (4, [])]
ODD = [(3, ["D1:1", "D2:2", "D3:1", "D9:1"])] * 4


def test_subset_keeps_only_subsets_with_the_target_number_of_questions():
    spec = {
        "a": TYPICAL,
        "b": TYPICAL,
        "c": TYPICAL,
        "d": ODD + ODD[:1],
        "e": TYPICAL,
        "f": TYPICAL + [(5, ["D1:1"])],
    }  # category 5 is left out: f has 4 questions
    choice = workload.choose_subset(questions(spec), size=3, target_questions=12)
    # d has 5 questions, so no subset with d has 12; the rest all look alike: ties go to the
    # ids that sort first
    assert choice.conversations == ["a", "b", "c"]
    assert choice.target_met and choice.questions == 12 and choice.candidates == 10
    assert set(choice.divergences) == set(workload.AXES) and choice.binning == workload.BINNING


def test_subset_is_the_one_closest_to_the_whole_set():
    spec = {"g": TYPICAL, "h": TYPICAL, "i": TYPICAL, "j": ODD}
    choice = workload.choose_subset(questions(spec), size=3, target_questions=12)
    # a quarter of all questions are j's: a subset without j has none of them, one with j has
    # a third, which is closer on every axis
    assert choice.conversations == ["g", "h", "j"]
    whole = workload.question_axes(questions(spec))
    without_j = whole[whole["conversation_id"] != "j"]
    for axis in workload.AXES:
        assert workload.divergence(without_j[axis], whole[axis]) > choice.divergences[axis]
    assert workload.divergence(whole["category"], whole["category"]) == pytest.approx(0)


def test_subset_on_a_small_sample_says_the_target_was_not_met():
    spec = {"x": [(1, ["D1:1"])], "y": [(2, ["D1:1", "D7:2"]), (5, [])]}
    choice = workload.choose_subset(questions(spec), size=4, target_questions=665)
    assert choice.conversations == ["x", "y"] and not choice.target_met
    assert choice.available_conversations == 2 and choice.questions == 2
    axes = workload.question_axes(questions(spec)).set_index("question_id")
    assert axes.loc["y-0", "evidence_span"] == "6+" and axes.loc["y-0", "evidence_turns"] == "2"
    with pytest.raises(ValueError, match="no LoCoMo questions"):
        workload.choose_subset(questions({"z": [(5, [])]}))


def test_accuracy_comes_from_judgments_or_is_missing(tmp_path):
    path = tmp_path / "judgments.jsonl"
    missing = analysis.subset_accuracy(path, ["c1"], ["mem0", "observational"], ["m"])
    assert missing["accuracy"].isna().all()
    assert missing["status"].str.startswith("missing").all()
    records = []
    for conv, labels in {
        "c1": ["CORRECT", "WRONG"],
        "c2": ["CORRECT", "CORRECT"],
        "c3": ["WRONG", "WRONG"],
    }.items():
        for i, label in enumerate(labels):
            for vote in (0, 1):
                records.append(
                    {
                        "question_id": f"{conv}-{i}",
                        "conversation_id": conv,
                        "system": "memory_mem0_style",
                        "vote": vote,
                        "primary": True,
                        "label": label if vote == 0 else "CORRECT",
                        "judge_model": "lexical",
                        "backend": "offline",
                    }
                )
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    hindsight = [{**r, "system": "memory_hindsight", "label": "WRONG"} for r in records]
    path.write_text("".join(json.dumps(r) + "\n" for r in records + hindsight))
    table = analysis.subset_accuracy(
        path, ["c1", "c2"], ["mem0", "hindsight", "observational"], ["m"], n_resamples=200
    )
    assert table["judged_system"].tolist() == [
        "memory_mem0_style",
        "memory_hindsight",
        "memory_observational",
    ]
    assert table["accuracy"].iloc[1] == 0.0  # the main study's Hindsight answers
    assert pd.isna(table["accuracy"].iloc[2])
    assert table["status"].iloc[2] == "missing: memory_observational not judged on the subset"
    row = table.iloc[0]
    assert row["status"] == "measured" and row["questions"] == 4
    assert row["accuracy"] == pytest.approx(0.75)  # vote 0 only, subset conversations only
    assert row["accuracy_low"] <= 0.75 <= row["accuracy_high"]


def test_rows_are_priced_with_the_price_table_and_overrides():
    rows = pd.DataFrame(
        {
            "model": ["x-model", "x-model"],
            "stage": ["answer", "retrieve"],
            "prompt_tokens": [1_000_000, 500_000],
            "cached_tokens": [0, 0],
            "output_tokens": [100_000, 0],
            "reasoning_tokens": [100_000, 0],
        }
    )
    priced = systems.price_rows(
        rows,
        embedding_model="text-embedding-3-small",
        price_overrides={"x-model": {"input": 0.5, "output": 2.0}},
    )
    assert priced["priced_as"].tolist() == ["x-model", "text-embedding-3-small"]
    assert priced["usd"].tolist() == pytest.approx([0.5 + 0.4, 0.01])
    with pytest.raises(KeyError, match="no price for model 'x-model'"):
        systems.price_rows(rows, embedding_model="text-embedding-3-small")


def test_a_call_above_a_long_context_tier_costs_the_same_in_the_serving_table_and_the_ledger():
    """Today's rows bill a prompt above 272,000 tokens whole at the tier's prices: the serving
    study prices its calls as the ledger and :meth:`Price.cost` do, not at the base rate."""
    from memcost.catalog import price_for
    from memcost.costs.ledger import price_calls

    model = "gpt-6.1-terra"
    tier = price_for(model, on="2026-11-30")
    assert tier.long_context_threshold == 272_000 and tier.long_context_input_multiplier > 1
    calls = {
        "prompt_tokens": [300_000, 100_000],
        "cached_tokens": [200_000, 50_000],
        "output_tokens": [1_000, 1_000],
        "reasoning_tokens": [500, 0],
    }
    expected = [
        tier.cost(prompt_tokens=p, cached_prompt_tokens=c, completion_tokens=o + r)
        for p, c, o, r in zip(*calls.values(), strict=True)
    ]
    overrides = {model: {"input": tier.input, "cached_input": tier.cached_input}}
    served = systems.price_rows(
        pd.DataFrame({"model": model, "stage": "answer", **calls}),
        embedding_model="text-embedding-3-small",
        price_overrides=overrides,
    )
    assert served["usd"].tolist() == pytest.approx(expected)
    assert (
        expected[0]
        > (100_000 * tier.input + 200_000 * tier.cached_input + 1_500 * tier.output) / 1e6
    )
    ledger = price_calls(
        pd.DataFrame(
            {
                "model": model,
                "stage": "read",
                "backend": "openai",
                "prompt_tokens": calls["prompt_tokens"],
                "cached_prompt_tokens": calls["cached_tokens"],
                "completion_tokens": [1_500, 1_000],
            }
        ),
        on="2026-11-30",
    )
    assert ledger["cost_usd"].tolist() == pytest.approx(expected)


def test_gamma_zeta_and_cost_per_accuracy():
    rows = pd.DataFrame(
        {
            "system": "mem0",
            "model": "m",
            "reasoning_effort": "low",
            "stage": ["answer", "ingest_extract", "retrieve"],
            "prompt_tokens": [100, 1000, 10],
            "output_tokens": [10, 200, 0],
            "reasoning_tokens": [20, 100, 0],
        }
    )
    ratios = analysis.gamma_zeta(rows).iloc[0]
    assert ratios["gamma_ans"] == pytest.approx(0.3) and ratios["zeta_ans"] == pytest.approx(2)
    assert ratios["gamma_ing"] == pytest.approx(0.3) and ratios["zeta_ing"] == pytest.approx(0.5)
    costs = pd.DataFrame(
        {
            "source": "synthetic",
            "system": ["mem0", "observational"],
            "model": "m",
            "reasoning_effort": "low",
            "cell": "100×100",
            "runs": 8,
            "usd_per_conversation": [0.02, 0.01],
        }
    )
    acc = pd.DataFrame(
        {
            "system": ["mem0", "observational"],
            "model": "m",
            "judged_system": ["memory_mem0_style", None],
            "accuracy": [0.5, None],
            "accuracy_low": [0.4, None],
            "accuracy_high": [0.6, None],
            "questions": [10, 0],
            "status": ["measured", "missing: none"],
        }
    )
    cpa = analysis.cpa_table(costs, acc, "100×100").set_index("system")
    assert cpa.loc["mem0", "cpa_usd"] == pytest.approx(0.04)
    assert pd.isna(cpa.loc["observational", "cpa_usd"])
    assert cpa.loc["observational", "status"] == "missing: none"


def test_the_closest_subset_whatever_its_size_is_reported_beside_the_targeted_one():
    """The study imposes its question count as a filter; the closest subset over all may have
    another count (on the real LoCoMo file: conv-26, 43, 44 and 48, 644 questions, against the
    665 of conv-26, 42, 44 and 48). Both are reported."""
    spec = {"a": TYPICAL, "b": TYPICAL, "c": TYPICAL, "d": ODD + ODD}
    choice = workload.choose_subset(questions(spec), size=3, target_questions=12)
    assert choice.conversations == ["a", "b", "c"] and choice.questions == 12
    # the whole set is 40% d-like questions: half of a,b,d's are, none of a,b,c's
    assert choice.closest_conversations == ["a", "b", "d"] and choice.closest_questions == 16
    assert choice.closest_divergence < choice.total_divergence
    alone = workload.choose_subset(questions(spec), size=3, target_questions=99)  # none has 99
    assert alone.closest_conversations == alone.conversations == ["a", "b", "d"]


def test_accuracy_is_the_studys_judges_where_it_judged_and_says_so_where_not(tmp_path):
    """Total Recall §3 judged with one vote of gpt-oss-120b: its votes are used where a run has
    them beside another judge's, and a run judged by another judge says whose accuracy it is."""
    path = tmp_path / "judgments.jsonl"

    def votes(judge, labels):
        return [
            {"question_id": f"c1-{i}", "conversation_id": "c1", "system": "memory_mem0_style",
             "vote": 0, "primary": True, "label": label, "judge_model": judge,
             "backend": "openrouter"}
            for i, label in enumerate(labels)
        ]  # fmt: skip

    both = votes("openai/gpt-oss-120b", ["CORRECT", "WRONG"]) + votes("gpt-5-mini", ["WRONG"] * 2)
    path.write_text("".join(json.dumps(r) + "\n" for r in both))
    row = analysis.subset_accuracy(
        path, ["c1"], ["mem0"], ["m"], judge_model="gpt-oss-120b", n_resamples=50
    ).iloc[0]
    assert (row["status"], row["accuracy"], row["questions"]) == ("measured", 0.5, 2)
    assert row["judge_model"] == "openai/gpt-oss-120b"
    path.write_text("".join(json.dumps(r) + "\n" for r in votes("gpt-5-mini", ["WRONG"] * 2)))
    row = analysis.subset_accuracy(
        path, ["c1"], ["mem0"], ["m"], judge_model="gpt-oss-120b", n_resamples=50
    ).iloc[0]
    assert row["status"] == "measured by gpt-5-mini, not the study's judge gpt-oss-120b"
    assert row["accuracy"] == 0.0
