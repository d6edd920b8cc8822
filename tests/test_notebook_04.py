"""Notebook 04 under papermill: notebook 00 on the bundled LoCoMo sample, answer files written
here (gold, verbose, wrong, one failed call), then the judge, offline."""

from __future__ import annotations

import pandas as pd
import pytest
import yaml

from memcost.answers import AnswerWriter
from memcost.calls import read_calls
from memcost.io import read_json, read_jsonl
from memcost.offline import LEXICAL
from memcost.params import notebook_parameters
from memcost.paths import PARAMS_DIR
from memcost.run import discover_notebooks, load_preset, run_preset

# a hang guard; notebook executions are slow on a busy 2-core machine
pytestmark = pytest.mark.timeout(600)

BASE = dict(
    model="gpt-5-mini-2025-08-07",
    backend="offline",
    prompt_version="t@v1",
    prompt_tokens=10,
    cached_prompt_tokens=0,
    completion_tokens=3,
    reasoning_tokens=0,
    latency_s=0.01,
    error=None,
)
SHARED = {
    "backend": "offline",
    "base_url": "",
    "max_cost_usd": 50.0,
    "price_overrides": {},
    "client": {},
    "run_dir": "",
    "dataset": "locomo",
}


def preset(tmp_path, step: str, **parameters) -> str:
    path = tmp_path / f"preset_{step}.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "description": "notebook 04 test",
                "datasets": ["locomo"],
                "steps": [step],
                "parameters": parameters,
            }
        )
    )
    return str(path)


def test_parameters_follow_the_shared_contract():
    declared = notebook_parameters(discover_notebooks()["04"])
    for name, default in SHARED.items():
        assert name in declared, name
        assert declared[name]["default"] == repr(default).replace("'", '"'), name
    assert declared["n_votes"]["default"] == "3"
    assert declared["reasoning_effort"]["default"] == '"high"'
    assert declared["include_adversarial"]["default"] == "False"
    # "Run All" by hand does what the smoke preset does: PersonaMem v2 as multiple choice, all
    # three judge prompts (the paper presets name their own: open-ended, the default prompt)
    assert declared["mode"]["default"] == '"multiple_choice"'
    smoke = load_preset(PARAMS_DIR / "smoke.yaml")
    assert smoke.per_dataset["personamem"]["mode"] == "multiple_choice"
    assert declared["judge_prompts"]["default"] == '["judge", "judge_lenient", "judge_strict"]'
    assert smoke.parameters["judge_prompts"] == ["judge", "judge_lenient", "judge_strict"]


def write_inputs(ds) -> tuple[pd.DataFrame, int]:
    """Answers of four systems and a facts table; returns the questions and memory's expected
    correct count (gold answers are correct, "I don't know" is not, one call failed)."""
    questions = pd.read_parquet(ds.questions)
    scored = questions["category"] != "adversarial"
    expected_memory = 0
    with (
        AnswerWriter(ds, "memory_mem0_style") as memory,
        AnswerWriter(ds, "long_context_gpt-5-mini") as lc_mini,
        AnswerWriter(ds, "long_context_gpt-oss-120b") as lc_oss,
        AnswerWriter(ds, "rolling_window_gpt-5-mini") as window,
    ):
        for i, row in enumerate(questions.itertuples()):
            common = dict(BASE, question_id=row.question_id, conversation_id=row.conversation_id)
            if i == 1:
                record = dict(common, answer="", error="HTTP 500 after 4 attempts")
            else:
                record = dict(common, answer=row.answer if i % 2 == 0 else "I don't know")
                expected_memory += int(i % 2 == 0 and scored.iloc[i])
            memory.write(
                dict(
                    record,
                    retrieved_item_ids=[f"{row.conversation_id}:f{i % 3}"],
                    retrieved_scores=[0.5],
                    retrieved_tokens=12,
                    search_latency_s=0.01,
                    evidence_recall=None,
                )
            )
            lc_mini.write(
                dict(
                    common,
                    answer=f"From the conversation: {row.answer}.",
                    context_tokens=9000,
                    dropped_tokens=0,
                )
            )
            lc_oss.write(
                dict(
                    common,
                    answer=row.answer if i % 3 else "Something else entirely",
                    context_tokens=9000,
                    dropped_tokens=0,
                )
            )
            window.write(
                dict(
                    common,
                    answer="I don't know" if i % 4 else row.answer,
                    context_tokens=400,
                    dropped_tokens=8600,
                )
            )
    facts = [
        {
            "fact_id": f"{c}:f{k}",
            "conversation_id": c,
            "text": text,
            "status": "active",
            "session_datetime": "2023-04-01T10:00:00",
        }
        for c in questions["conversation_id"].unique()
        for k, text in enumerate(
            ["She goes to yoga twice a week", "He has a beagle", "Visited her sister"]
        )
    ]
    pd.DataFrame(facts).to_parquet(ds.memory / "facts.parquet")
    return questions, expected_memory


def test_notebook_04_judges_every_system_offline(tmp_path, prepared_run):
    run = prepared_run(["locomo"])  # notebook 00's files, from the session's smoke run
    run_name = str(run.root)
    ds = run.dataset("locomo")
    questions, expected_memory = write_inputs(ds)
    run_preset(
        preset(tmp_path, "04", judge_prompts=["judge", "judge_lenient", "judge_strict"]),
        run_name=run_name,
        stream=False,
    )

    table3 = pd.read_csv(ds.tables / "table3_accuracy.csv").set_index("system")
    systems = [
        "memory_mem0_style",
        "long_context_gpt-5-mini",
        "long_context_gpt-oss-120b",
        "rolling_window_gpt-5-mini",
    ]
    assert table3.index.tolist() == systems
    scored = int((questions["category"] != "adversarial").sum())
    assert (table3["n"] == scored).all()
    assert (table3["judge_model"] == "lexical").all() and (table3["backend"] == "offline").all()
    memory = table3.loc["memory_mem0_style"]
    assert (memory["judged"], memory["unjudged"], memory["answer_errors"]) == (scored - 1, 1, 1)
    assert memory["correct"] == expected_memory
    assert memory["accuracy"] == pytest.approx(expected_memory / (scored - 1))
    assert memory["strict_accuracy"] == pytest.approx(expected_memory / scored)
    assert table3.loc["long_context_gpt-5-mini", "accuracy"] == 1.0
    for row in table3.itertuples():
        assert row.wilson_low <= row.accuracy <= row.wilson_high
        assert row.bootstrap_low <= row.accuracy + 1e-9
        assert row.accuracy - 1e-9 <= row.bootstrap_high
        assert row.vote_mean == pytest.approx(row.accuracy) and row.vote_std == 0  # lexical
        assert row.votes_per_question == 3

    votes = read_jsonl(ds.judgments)
    assert len(votes) == len(systems) * scored * 3 * 3  # systems × questions × votes × prompts
    assert {v["judge_model"] for v in votes} == {"lexical"}
    calls = read_calls(run.calls)
    assert len(calls) == (len(systems) * scored - 1) * 3 * 3
    assert {c["stage"] for c in calls} == {"judge"}

    for name in (
        "accuracy_by_category",
        "mcnemar",
        "answer_length",
        "judge_sensitivity",
        "failure_analysis",
        "failure_tags",
        "table3_vs_paper",
    ):
        assert (ds.tables / f"{name}.csv").is_file(), name
    paired = pd.read_csv(ds.tables / "mcnemar.csv")
    assert set(paired["system_b"]) == set(systems[1:])
    assert (paired["n_paired"] == scored - 1).all()
    sensitivity = pd.read_csv(ds.tables / "judge_sensitivity.csv")
    assert set(sensitivity["prompt_name"]) == {"judge", "judge_lenient", "judge_strict"}
    failures = pd.read_csv(ds.tables / "failure_analysis.csv")
    assert len(failures) > 0 and failures["retrieved_facts"].str.contains("2023-04-01").all()
    versus = pd.read_csv(ds.tables / "table3_vs_paper.csv")
    assert not versus["comparable"].any()
    assert versus.set_index("system").loc["memory_mem0_style", "paper_accuracy_pct"] == 57.68
    assert (ds.figures / "accuracy_by_system.png").stat().st_size > 10_000
    assert (ds.figures / "context_by_system.png").stat().st_size > 10_000  # memory beside the rest
    executed = (ds.notebooks / "04_judge_answers.ipynb").read_text()
    assert "full history / memory_mem0_style: 750.0×" in executed  # medians 9,000 and 12 tokens

    metrics = read_json(ds.metrics / "04_judge_answers.json")
    accuracy = metrics["metrics"]["accuracy"]
    assert set(accuracy) == set(systems)
    assert accuracy["memory_mem0_style"]["accuracy"] == pytest.approx(memory["accuracy"], abs=1e-6)
    assert accuracy["memory_mem0_style"]["unjudged"] == 1
    assert metrics["metrics"]["scored_questions"] == scored
    assert metrics["metrics"]["comparable_with_paper"] is False
    assert metrics["metrics"]["missing_systems"] == ["no_context_<model>", "oracle_<model>"]
    assert metrics["parameters"]["n_votes"] == 3
    manifest = read_json(run.manifest)
    assert manifest["llm"]["locomo/04_judge_answers"]["offline_calls"] == len(calls)
    assert manifest["notebooks"]["locomo/04_judge_answers"]["status"] == "ok"
    assert LEXICAL in {v["judge_model"] for v in votes}
