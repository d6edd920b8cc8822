"""Measured costs from hand-made ledgers, with dollars worked out by hand."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from memcost import costs
from memcost.calls import CallStore
from memcost.catalog import UnknownPriceError, price_for
from memcost.costs.ledger import ESTIMATE, MEASURED
from memcost.costs.measured import measured_cost_model, per_user_series
from memcost.costs.model import token_break_even

NANO, MINI, EMBED = "gpt-5-nano-2025-08-07", "gpt-5-mini-2025-08-07", "text-embedding-3-small"


def record(stage: str, model: str, prompt: int, completion: int = 0, **extra) -> dict:
    base = {
        "timestamp": extra.pop("timestamp", "2025-09-15T10:00:00+00:00"),
        "stage": stage,
        "provider": "openai",
        "model": model,
        "backend": "openai",
        "request_hash": extra.pop("request_hash", f"h-{stage}-{extra.get('question_id')}-{prompt}"),
        "prompt_version": "v1",
        "cached": False,
        "prompt_tokens": prompt,
        "cached_prompt_tokens": 0,
        "completion_tokens": completion,
        "reasoning_tokens": 0,
        "latency_s": 1.0,
        "attempts": 1,
        "error": None,
        "dataset": "longmemeval",
        "conversation_id": "c1",
        "question_id": None,
        "system": None,
        "sample_index": 0,
    }
    base.update(extra)
    return base


def hand_ledger() -> list[dict]:
    """One user, two questions; each record's cost is in the comment (USD)."""
    lc = "long_context_gpt-5-mini"
    return [
        # 10,000 × 0.05/1M + 2,000 × 0.40/1M = 0.0005 + 0.0008
        record("extract", NANO, 10_000, 2_000, reasoning_tokens=1_000),  # 0.0013
        record("update", NANO, 1_000, 500),  # 0.00025
        record("embed", EMBED, 5_000),  # 0.0001
        record("embed", EMBED, 10, question_id="q1", system="memory_mem0_style"),  # 0.0000002
        record("read", MINI, 2_000, 500, question_id="q1", system="memory_mem0_style"),  # 0.0015
        record(
            "read", MINI, 2_000, 500, question_id="q2", system="memory_mem0_style", attempts=3
        ),  # 0.0015
        record(
            "long_context",
            MINI,
            100_000,
            500,
            question_id="q1",
            system=lc,
            timestamp="2025-09-15T10:01:00+00:00",
        ),  # 0.026
        # 160 × 0.25/1M + 99,840 × 0.025/1M + 500 × 2/1M = 0.00004 + 0.002496 + 0.001
        record(
            "long_context",
            MINI,
            100_000,
            500,
            question_id="q2",
            system=lc,
            cached_prompt_tokens=99_840,
            timestamp="2025-09-15T10:02:00+00:00",
        ),  # 0.003536
        # a resumed run replays q1 from the local cache: not part of the workload again
        record(
            "long_context",
            MINI,
            100_000,
            500,
            question_id="q1",
            system=lc,
            cached=True,
            request_hash="h-long_context-q1-100000",
            timestamp="2025-09-15T11:00:00+00:00",
        ),
        record(
            "judge", MINI, 1_000, 1_000, question_id="q1", system=lc, reasoning_tokens=800
        ),  # 0.00225
    ]


def write_ledger(run_dir, records) -> None:
    """A run whose store of calls holds these records (and no answers: they are not read)."""
    with CallStore(run_dir) as store:
        for r in records:
            store.add(r)


@pytest.fixture
def priced(tmp_path):
    write_ledger(tmp_path / "run", hand_ledger())
    return costs.price_calls(costs.load_ledger([tmp_path / "run"]))


def test_each_record_priced_exactly(priced):
    expected = [0.0013, 0.00025, 0.0001, 0.0000002, 0.0015, 0.0015, 0.026, 0.003536, 0.026, 0.00225]
    assert priced["cost_usd"].tolist() == pytest.approx(expected, abs=1e-12)
    # the replay is priced (its original usage) but neither spent again nor part of the workload
    assert priced["workload"].tolist() == [True] * 8 + [False, True]
    assert priced["spent_usd"].iloc[8] == 0.0


def test_stage_costs_and_summary(priced):
    stages = costs.stage_costs(priced).set_index(["stage", "system"])
    assert stages.loc[("extract", pd_na()), "cost_usd"] == pytest.approx(0.0013)
    assert stages.loc[("long_context", "long_context_gpt-5-mini"), "cost_usd"] == pytest.approx(
        0.029536
    )
    assert (
        stages.loc[("read", "memory_mem0_style"), "api_requests"] == 4
    )  # one retry-free + three attempts
    summary = costs.summary_table(priced).set_index("component")
    assert summary.loc["write: total", "total_usd"] == pytest.approx(0.00165)
    assert summary.loc["write: total", "usd_per_conversation"] == pytest.approx(0.00165)
    read = summary.loc["read: memory answers (incl. query embeddings)"]
    assert read["total_usd"] == pytest.approx(0.0030002)
    assert read["usd_per_question"] == pytest.approx(0.0015001)
    assert (read["questions"], read["api_requests"]) == (2, 5)  # requests exceed questions
    lc = summary.loc["answer: long_context_gpt-5-mini (gpt-5-mini)"]
    assert lc["usd_per_question"] == pytest.approx(0.029536 / 2)
    assert summary.loc["judge", "total_usd"] == pytest.approx(0.00225)
    assert set(summary["basis"]) == {MEASURED}


def pd_na():
    return pd.NA


def test_user_and_question_costs(priced):
    users = costs.user_costs(priced).set_index("conversation_id")
    row = users.loc["c1"]
    assert row["write_usd"] == pytest.approx(0.00165)
    assert row["read_usd"] == pytest.approx(0.0030002)
    assert row["long_context_gpt-5-mini_usd"] == pytest.approx(0.029536)
    assert row["judge_usd"] == pytest.approx(0.00225)
    assert row["total_usd"] == pytest.approx(0.00165 + 0.0030002 + 0.029536 + 0.00225)
    questions = costs.question_costs(priced).set_index(["question_id", "system"])
    assert questions.loc[("q1", "memory_mem0_style"), "cost_usd"] == pytest.approx(0.0015002)
    assert questions.loc[("q2", "long_context_gpt-5-mini"), "cost_usd"] == pytest.approx(0.003536)


def test_a_request_shared_by_two_items_is_work_for_both(tmp_path):
    # Two systems gave the same answer: the judge request is the same, the second served from
    # the local cache. Both are part of the workload; only the first was paid for.
    first = record(
        "judge",
        MINI,
        1_000,
        1_000,
        question_id="q1",
        system="memory_mem0_style",
        request_hash="h-same",
    )
    second = dict(first, system="rolling_window_gpt-5-mini", cached=True)
    write_ledger(tmp_path / "run", [first, second])
    priced = costs.price_calls(costs.load_ledger([tmp_path / "run"]))
    assert priced["workload"].tolist() == [True, True]
    assert priced["spent_usd"].tolist() == pytest.approx([0.00225, 0.0])
    stages = costs.stage_costs(priced).set_index("system")
    assert stages.loc["rolling_window_gpt-5-mini", "cost_usd"] == pytest.approx(0.00225)


def test_cached_share_and_token_ratios(priced):
    share = costs.lc_cached_share(priced).iloc[0]
    assert share["cached_share"] == pytest.approx(99_840 / 200_000)
    assert share["share_after_first"] == pytest.approx(99_840 / 100_000)
    ratios = costs.token_ratios(priced).set_index("stage")
    assert ratios.loc["extract", "gamma"] == pytest.approx(2_000 / 10_000)
    assert ratios.loc["extract", "zeta"] == pytest.approx(1_000 / 1_000)
    assert ratios.loc["judge", "zeta"] == pytest.approx(800 / 200)


def test_measured_cost_model(priced):
    model, details = measured_cost_model(priced, "longmemeval", "long_context_gpt-5-mini")
    assert model.write_usd == pytest.approx(0.00165)
    assert model.read_usd == pytest.approx(0.0015001)
    assert model.lc_first_usd == pytest.approx(0.026)
    assert model.lc_cached_usd == pytest.approx(0.003536)
    assert details["lc_cached_from"].startswith("measured")
    series = per_user_series(priced, "longmemeval", "long_context_gpt-5-mini")
    assert series["memory_usd"].tolist() == pytest.approx([0.00165 + 0.0015002, 0.0015])


def test_offline_records_are_labelled_estimates(tmp_path):
    records = [dict(r, backend="offline", provider="offline") for r in hand_ledger()]
    write_ledger(tmp_path / "run", records)
    priced = costs.price_calls(costs.load_ledger([tmp_path / "run"]))
    assert costs.is_estimate(priced)
    for table in (
        costs.stage_costs(priced),
        costs.summary_table(priced),
        costs.token_ratios(priced),
        costs.user_costs(priced),
    ):
        assert set(table["basis"]) == {ESTIMATE}
    # offline token counts are priced as the configured models: same dollars as measured
    assert costs.workload(priced)["cost_usd"].sum() == pytest.approx(0.0364362, abs=1e-12)
    # ... but an offline run pays nothing
    assert priced["spent_usd"].sum() == 0.0
    assert costs.summary_table(priced)["spent_usd"].sum() == 0.0


def test_missing_price_names_model_and_table(tmp_path):
    write_ledger(tmp_path / "run", [record("read", "mystery-model-7b", 100, 10)])
    with pytest.raises(UnknownPriceError, match="mystery-model-7b.*memcost/assets/prices.csv"):
        costs.price_calls(costs.load_ledger([tmp_path / "run"]))
    # an override prices it; a partial override of an unknown model is refused, not zeroed
    ok = costs.price_calls(
        costs.load_ledger([tmp_path / "run"]), {"mystery-model-7b": {"input": 1.0, "output": 2.0}}
    )
    assert ok["cost_usd"].iloc[0] == pytest.approx(100e-6 + 20e-6)
    with pytest.raises(UnknownPriceError, match="output"):
        costs.price_calls(costs.load_ledger([tmp_path / "run"]), {"mystery-model-7b": {"input": 1}})


def test_combining_runs_and_missing_ledger(tmp_path):
    write_ledger(tmp_path / "a", hand_ledger()[:3])
    (tmp_path / "b").mkdir()
    calls = costs.load_ledger([tmp_path / "a", tmp_path / "b"])
    assert len(calls) == 3
    assert costs.ledger_paths([tmp_path / "a", tmp_path / "b"]) == {
        str(tmp_path / "a" / "calls.sqlite"): True,
        str(tmp_path / "b" / "calls.sqlite"): False,
    }
    empty = costs.price_calls(costs.load_ledger([tmp_path / "b"]))
    assert empty.empty and costs.summary_table(empty).empty


def test_cost_per_correct_answer(priced, tmp_path):
    judgments = []
    for system, outcomes in (
        (
            "memory_mem0_style",
            {"q1": ["CORRECT", "CORRECT", "WRONG"], "q2": ["WRONG", "WRONG", "CORRECT"]},
        ),
        (
            "long_context_gpt-5-mini",
            {"q1": ["CORRECT"] * 3, "q2": ["CORRECT", "UNJUDGED", "WRONG"]},
        ),
    ):
        for question, labels in outcomes.items():
            for vote, label in enumerate(labels):
                judgments.append(
                    {
                        "question_id": question,
                        "conversation_id": "c1",
                        "system": system,
                        "vote": vote,
                        "label": label,
                    }
                )
    folder = tmp_path / "run" / "longmemeval"
    folder.mkdir(parents=True)
    (folder / "judgments.jsonl").write_text("\n".join(json.dumps(j) for j in judgments) + "\n")
    (folder / "data").mkdir()  # a dataset folder of a run is one notebook 00 has prepared
    pd.DataFrame({"question_id": ["q1", "q2"]}).to_parquet(folder / "data" / "questions.parquet")
    votes = costs.majority_votes(costs.run_judgments([tmp_path / "run"]))
    by = votes.set_index(["system", "question_id"])["correct"]
    assert by.to_dict() == {
        ("long_context_gpt-5-mini", "q1"): True,
        ("long_context_gpt-5-mini", "q2"): False,  # 1 of 2 judged: no majority
        ("memory_mem0_style", "q1"): True,
        ("memory_mem0_style", "q2"): False,
    }
    cpa = costs.cost_per_correct(priced, votes).set_index("system")
    assert cpa.loc["memory_mem0_style", "accuracy"] == 0.5
    assert cpa.loc["memory_mem0_style", "cpa_usd"] == pytest.approx(0.0015001 / 0.5)
    assert cpa.loc["memory_mem0_style", "cpa_with_write_usd"] == pytest.approx(
        (0.0030002 + 0.00165) / 2 / 0.5
    )
    assert cpa.loc["long_context_gpt-5-mini", "cpa_usd"] == pytest.approx(0.029536 / 2 / 0.5)


def test_offline_long_context_is_priced_with_the_cache_assumption(tmp_path):
    """The offline backend has no provider cache: later calls are repriced as cached (the
    paper's assumption) rather than read as 'caching failed'."""
    records = [dict(r, backend="offline", cached_prompt_tokens=0) for r in hand_ledger()]
    write_ledger(tmp_path / "run", records)
    priced = costs.price_calls(costs.load_ledger([tmp_path / "run"]))
    model, details = measured_cost_model(priced, "longmemeval", "long_context_gpt-5-mini")
    assert details["lc_cached_from"].startswith("assumed")
    assert model.lc_cached_usd == pytest.approx((100_000 * 0.025 + 500 * 2.0) / 1e6)
    constants, details = costs.measured_constants(priced, "longmemeval", "long_context_gpt-5-mini")
    assert constants.cached_share == 1.0
    assert constants.at(100_000).lc_cached_usd == pytest.approx(model.lc_cached_usd)
    # the per-user series prices long context by the same rule: offline, from the second
    # question on, the whole prompt cached (as it came, it was all uncached), so a user's
    # break-even and the model's agree
    series = per_user_series(priced, "longmemeval", "long_context_gpt-5-mini")
    lc = priced.loc[priced["stage"] == "long_context"]
    second = lc.iloc[1]
    price = price_for(str(second["model"]))
    cached = price.cost(
        prompt_tokens=int(second["prompt_tokens"]),
        cached_prompt_tokens=int(second["prompt_tokens"]),
        completion_tokens=int(second["completion_tokens"]),
    )
    assert series["long_context_usd"].tolist() == pytest.approx([0.026, cached])
    assert cached < float(second["cost_usd"])  # cheaper than the call as it came


def test_measured_break_even_per_dataset_and_user(tmp_path):
    write_ledger(tmp_path / "run", hand_ledger())
    priced = costs.price_calls(costs.load_ledger([tmp_path / "run"]))
    models, users, skipped = costs.measured_break_even(priced)
    assert not models.empty and not users.empty
    # one model row per dataset x long-context system, one user row per conversation x system
    assert len(models) == models[["dataset", "lc_system"]].drop_duplicates().shape[0]
    assert set(users["system"]) <= set(models["lc_system"])
    for row in users.itertuples():
        first, sustained = row.first_break_even, row.sustained_break_even
        if sustained == sustained:  # not NaN: sustained can only come at or after the first
            assert first <= sustained
    summary = costs.break_even_by_user_summary(users)
    assert summary["users"].sum() == len(users)


def test_the_token_break_even_also_in_the_cognee_notes_convention(priced):
    """cognee's token-cost note leaves embedding tokens out of what memory ingests; the measured
    table gives both, so its 23-26 queries can be compared with this repository's count."""
    _, details = measured_cost_model(priced, "longmemeval", "long_context_gpt-5-mini")
    write = priced.loc[
        (priced["dataset"] == "longmemeval")
        & priced["stage"].isin(["extract", "update", "embed"])
        & (priced["system"].fillna("memory_mem0_style") == "memory_mem0_style")
    ]
    # the facts' embeddings (a question's embedding is read, not written)
    embedded = write.loc[(write["stage"] == "embed") & write["question_id"].isna(), "prompt_tokens"]
    embedded = embedded.sum()
    assert embedded > 0
    model_only = details["ingestion_tokens_per_conversation"] - embedded / details["conversations"]
    expected = token_break_even(
        model_only,
        details["lc_prompt_tokens_per_question"],
        details["read_prompt_tokens_per_question"],
    )
    assert details["token_break_even_without_embeddings"] == pytest.approx(expected)
    assert details["token_break_even_without_embeddings"] < details["token_break_even"]
