"""Published runs: invented files in each source's exact schema, read, checked and aligned."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from memcost.paths import DataError
from memcost_published import runs as published

# This repository's LoCoMo questions, as notebook 00 writes them: conversations in file order,
# each question's id its position in the conversation's list (category 5 included).
QUESTIONS = pd.DataFrame(
    [
        ("conv-26-q0", "conv-26", "When did Caroline go to the support group?", 2),
        ("conv-26-q1", "conv-26", "What did Melanie paint?", 4),
        ("conv-26-q2", "conv-26", "Who is Caroline's mentor?", 5),
        ("conv-26-q3", "conv-26", "What did Melanie paint?", 4),  # asked twice
        ("conv-30-q0", "conv-30", "Where does Jon work?", 1),
        ("conv-30-q1", "conv-30", "When did Gina open her store?", 2),
    ],
    columns=["question_id", "conversation_id", "question", "category_id"],
)


def mem0_file() -> dict:
    def item(conv, k, text, truth, answer, judgment):
        return {
            "question_id": f"conv{conv}_q{k}", "conversation_idx": conv, "category": 4,
            "category_name": "single-hop", "question": text, "ground_truth_answer": truth,
            "total_memories_retrieved": 200, "search_latency_ms": 120.5,
            "add_latency_total_ms": None,
            "cutoff_results": {"top_200": {"judgment": judgment, "score": 1.0,
                                           "generated_answer": answer, "memories_evaluated": 200}},
        }  # fmt: skip

    return {
        "metadata": {"answerer_model": "gpt-5", "judge_model": "gpt-5", "total_questions": 4},
        "metrics_by_cutoff": {},
        "evaluations": [
            item(
                0, 0, "When did Caroline go to the support group?", "7 May 2023", "May 7", "CORRECT"
            ),
            item(0, 1, "what did Melanie paint", "a sunrise", "A sunrise.", "CORRECT"),
            item(0, 3, "What did Melanie paint?", "a lake", "A horse.", "WRONG"),
            item(1, 0, "Where does Jon work?", "a bank", "At a bank.", "CORRECT"),
            # conv-30-q1 is missing from this run
        ],
    }


def judged_file(votes: dict[str, list[bool]]) -> dict:
    """The full-context audit's schema: renamed ids (``locomo_<k>_qa<i>``), three judgments."""
    texts = dict(zip(QUESTIONS["question_id"], QUESTIONS["question"], strict=True))
    detailed: dict[str, list] = {}
    for qid, verdicts in votes.items():
        conv = 0 if qid.startswith("conv-26") else 1
        i = int(qid.rsplit("q", 1)[1])
        detailed.setdefault(f"locomo_exp_user_{conv}", []).append(
            {"question_id": f"locomo_{conv}_qa{i}", "question": texts[qid],
             "golden_answer": "gold", "generated_answer": "an answer", "category": "4",
             "llm_judgments": {f"judgment_{n + 1}": v for n, v in enumerate(verdicts)}}
        )  # fmt: skip
    return {"total_questions": len(votes), "correct": 0, "accuracy": 0.0,
            "detailed_results": detailed,
            "metadata": {"answer_model": "gpt-4o-mini", "total_prompt_tokens": 1_000_000,
                         "total_completion_tokens": 100_000}}  # fmt: skip


def zep_file() -> dict:
    def grade(text, ok):
        return {"question": text, "answer": "x", "golden_answer": "y", "grade": ok, "category": 4}

    return {
        "locomo_experiment_user_0": [
            grade("What did Melanie paint?", True),
            grade("What did Melanie paint?", False),  # its second occurrence: conv-26-q3
        ],
        "locomo_experiment_user_1": [grade("Where does Jon work?", True)],
    }


def gold_file() -> list:
    return [
        {"question_id": "locomo_0_qa1", "question": "What did Melanie paint?",
         "golden_answer": "a sunrise", "category": 4, "error_type": "WRONG_CITATION",
         "cited_evidence": ["D1:12"], "correct_evidence": ["D1:14"], "reasoning": "...",
         "correct_answer": "a sunrise"},
        {"question_id": "locomo_1_qa1", "question": "When did Gina open her store?",
         "golden_answer": "2022", "category": 2, "error_type": "TEMPORAL_ERROR",
         "cited_evidence": [], "correct_evidence": [], "reasoning": "...",
         "correct_answer": "2023"},
    ]  # fmt: skip


ENTRIES = {
    "mem0_run": ("mem0_benchmarks", "memory", mem0_file()),
    "full_context_run": (
        "judged_answers",
        "long_context",
        judged_file(
            {
                "conv-26-q0": [True, True, False],
                "conv-26-q1": [False, False, True],
                "conv-26-q3": [True, True, True],
                "conv-30-q0": [True, False, False],
                "conv-30-q1": [True, True, True],
            }
        ),
    ),
    "zep_run": ("zep_grades", "memory", zep_file()),
    # wrong on purpose: the judge accepted one of five
    "probe_run": (
        "judged_answers",
        "probe",
        judged_file(
            {
                "conv-26-q0": [True, True, False],
                "conv-26-q1": [False, False, False],
                "conv-26-q3": [False, False, True],
                "conv-30-q0": [False, False, False],
                "conv-30-q1": [False, False, False],
            }
        ),
    ),
    "gold_run": ("gold_errors", "gold_audit", gold_file()),
}


@pytest.fixture
def copies(tmp_path, monkeypatch):
    """A folder of the invented files (``published_dir``) and a registry pinning their hashes."""
    folder = tmp_path / "published"
    folder.mkdir()
    registry = {}
    for name, (schema, kind, document) in ENTRIES.items():
        data = json.dumps(document).encode()
        (folder / f"{name}.json").write_bytes(data)
        registry[name] = {
            "repo": "someone/somewhere", "commit": "a" * 40, "path": f"{name}.json",
            "sha256": hashlib.sha256(data).hexdigest(), "license": "CC-BY-4.0",
            "dataset": "locomo", "kind": kind, "system": name,
            "answer_model": "" if kind in ("probe", "gold_audit") else "gpt-4o-mini",
            "judge_model": "j", "votes": 3, "schema": schema,
        }  # fmt: skip
    path = tmp_path / "published.yaml"
    path.write_text(json.dumps(registry), encoding="utf-8")  # JSON is YAML
    monkeypatch.setattr(published, "REGISTRY_FILE", path)
    published.registry.cache_clear()
    yield folder
    published.registry.cache_clear()


def aligned(folder: Path) -> pd.DataFrame:
    frames = [
        published.align(
            published.read_published(name, published_dir=folder, cache_dir=folder / "cache"),
            QUESTIONS,
            "locomo",
        )
        for name in ENTRIES
    ]
    return pd.concat(frames, ignore_index=True)


def test_every_schema_aligns_to_this_repositorys_questions_by_conversation_and_text(copies):
    frame = aligned(copies).set_index(["run", "source_id"])
    # Mem0's ids (conv0_q1) and the audit's (locomo_0_qa1) both become conv-26-q1; case and the
    # question mark do not matter
    assert frame.loc[("mem0_run", "conv0_q1"), "question_id"] == "conv-26-q1"
    assert frame.loc[("full_context_run", "locomo_1_qa1"), "question_id"] == "conv-30-q1"
    assert frame.loc[("gold_run", "locomo_1_qa1"), "corrected"] == "2023"
    # a question asked twice in one conversation: the n-th occurrence gets the n-th id
    zep = frame.loc["zep_run"]
    assert zep["question_id"].tolist() == ["conv-26-q1", "conv-26-q3", "conv-30-q0"]
    assert not frame["question_id"].isna().any()
    # a question this repository does not have, or a conversation it does not hold: unpaired
    stray = published.read_published("zep_run", published_dir=copies, cache_dir=copies)
    stray.loc[0, "question"], stray.loc[2, "conversation"] = "What is not asked?", "7"
    assert published.align(stray, QUESTIONS, "locomo")["question_id"].isna().tolist() == [
        True,
        False,
        True,
    ]


def test_accuracy_pairs_and_the_gold_ceiling(copies):
    frame = aligned(copies)
    accuracy = published.published_accuracy(frame, n_resamples=200).set_index("name")
    assert set(accuracy.index) == {"mem0_run", "full_context_run", "zep_run", "probe_run"}
    assert accuracy.loc["mem0_run", ["n", "correct"]].tolist() == [4, 3]
    # majority of three votes: 1, 0, 1, 0, 1 -> 3 of 5; the mean of the 15 votes is 10 of 15
    row = accuracy.loc["full_context_run"]
    assert (row["n"], row["correct"], row["accuracy_pct"]) == (5, 3, 60.0)
    assert row["vote_mean_pct"] == pytest.approx(100 * 10 / 15)
    assert row["wilson_low_pct"] < 60.0 < row["wilson_high_pct"]
    categories = published.category_accuracy(frame).set_index(["name", "category"])
    # the categories are the file's own: the full-context file labels all five category 4
    assert categories.loc[("full_context_run", "single_hop"), ["n", "correct"]].tolist() == [5, 3]
    pairs = published.published_pairs(frame).set_index(["a", "b"])
    mem0 = pairs.loc[("mem0_run", "full_context_run")]
    # conv-30-q1 is missing from the Mem0 run: four shared questions; Mem0 alone right on
    # conv-26-q1 and conv-30-q0, the full context alone on conv-26-q3
    assert (mem0["n_shared"], mem0["a_only"], mem0["b_only"]) == (4, 2, 1)
    assert mem0["p_value"] == pytest.approx(1.0)
    # the probe: one wrong answer in five accepted; a run at 60% under that judge is consistent
    # with (0.6 - 0.2) / 0.8 = 50% if its wrong answers persuade as well
    accepted = published.false_acceptance(accuracy.reset_index()).set_index("run")
    assert accepted.loc["full_context_run", "false_acceptance_pct"] == pytest.approx(20.0)
    assert accepted.loc["full_context_run", "corrected_pct"] == pytest.approx(50.0)
    assert "probe_run" not in accepted.index
    gold = frame[frame["run"] == "gold_run"]
    ceiling = published.gold_ceiling(gold, questions=5)
    # a wrong citation leaves the answer right: one wrong gold answer of five
    assert (ceiling["wrong_gold"], ceiling["ceiling_pct"]) == (1, 80.0)


def test_a_corrupt_file_a_changed_file_and_a_missing_one_are_one_line_errors(copies, tmp_path):
    path = copies / "zep_run.json"
    good = path.read_bytes()
    path.write_bytes(good.replace(b"true", b"false", 1))
    with pytest.raises(DataError) as changed:
        published.read_published("zep_run", published_dir=copies, cache_dir=tmp_path)
    message = str(changed.value)
    assert "\n" not in message and hashlib.sha256(good).hexdigest() in message
    assert hashlib.sha256(path.read_bytes()).hexdigest() in message
    # bytes that match their pin but are not the schema (a registry entry of the wrong schema)
    run = published.published_run("zep_run")
    malformed = {"question_id": "conv0_q7", "cutoff_results": {"top_1": {"judgment": "MAYBE"}}}
    for document, problem in [
        ({"evaluations": [{"question": "q", "cutoff_results": {"top_1": {}}}]}, "KeyError"),
        ({"evaluations": [malformed]}, r"question conv0_q7: verdict 'MAYBE' is none of CORRECT"),
        ({"evaluations": [{"question": "q"}]}, r"no answer in it"),  # retrieval records alone
    ]:
        data = json.dumps(document).encode()
        path.write_bytes(data)
        published.registry(None)["zep_run"] = published.PublishedRun(
            **{
                **run.__dict__,
                "sha256": hashlib.sha256(data).hexdigest(),
                "schema": "mem0_benchmarks",
            }
        )  # as published_run reads it
        with pytest.raises(
            DataError, match=rf"zep_run.json: not a mem0_benchmarks file .*{problem}"
        ):
            published.read_published("zep_run", published_dir=copies, cache_dir=tmp_path)
    with pytest.raises(DataError, match=r"nowhere/gold_run.json: not found; published_dir must"):
        published.read_published("gold_run", published_dir=tmp_path / "nowhere", cache_dir=tmp_path)
    with pytest.raises(DataError, match=r"download is off; set published_dir"):
        published.read_published("gold_run", cache_dir=tmp_path / "cache", download=False)
    with pytest.raises(DataError, match=r"unknown published run 'nope'; the registry has: mem0"):
        published.published_run("nope")


def test_longmemeval_runs_keep_the_datasets_own_ids_when_the_texts_agree(copies):
    document = {
        "metadata": {"model": "gpt-5"},
        "evaluations": [
            {"question_id": qid, "question_type": "temporal-reasoning", "question": text,
             "ground_truth_answer": "3 days", "total_memories_retrieved": 50,
             "search_latency_ms": 0.0, "add_latency_total_ms": 0.0,
             "cutoff_results": {"top_50": {"judgment": verdict, "reason": "",
                                           "supporting_evidence": "Three days."}}}
            for qid, text, verdict in [("gpt4_2f8be40d", "How many days?", "PASS"),
                                       ("001be529", "Another question?", "FAIL")]
        ],
    }  # fmt: skip
    # Mem0's open-source runs list a question twice: first a record of its retrieval alone
    document["evaluations"][:0] = [
        {"question_id": qid, "question_type": "temporal-reasoning", "question": text,
         "ground_truth_answer": "3 days", "is_abstention": False,
         "retrieval": {"search_query": text, "search_latency_ms": 0.0, "total_results": 200}}
        for qid, text in [("gpt4_2f8be40d", "How many days?"), ("001be529", "Another question?")]
    ]  # fmt: skip
    frame = pd.DataFrame(published._mem0_benchmarks(document), columns=published.COLUMNS[1:])
    frame.insert(0, "run", "lme")
    questions = pd.DataFrame(
        {"question_id": ["gpt4_2f8be40d", "001be529"], "question": ["How many days", "Other?"]}
    )
    out = published.align(frame, questions, "longmemeval")
    assert out["question_id"].tolist() == ["gpt4_2f8be40d", None]  # the second's text differs
    assert frame["votes"].tolist() == [(True,), (False,)]  # each question once, as answered
    assert frame["category"].tolist() == ["temporal-reasoning"] * 2
    assert frame["latency_ms"].isna().all()  # 0.0 there means not measured: no p50 of 0 s


def test_the_registry_pins_every_source_at_a_commit_with_its_hash_and_license():
    published.registry.cache_clear()
    runs = published.registry()
    assert len(runs) >= 12
    for run in runs.values():
        assert len(run.commit) == 40 and len(run.sha256) == 64 and run.license
        assert run.url.startswith("https://raw.githubusercontent.com/") and run.commit in run.url
    assert {r.kind for r in runs.values()} == set(published.KINDS)
    assert {r.schema for r in runs.values()} == set(published.PARSERS)
    # every answering model has a dated list price, so the cost table never stops on a run
    # (Memobase's gpt-4o once had none)
    for run in runs.values():
        if run.answer_model:
            assert published.price_for(run.answer_model).input > 0, run.answer_model
    # a judge is its model and its prompt: Mem0's benchmark judges with its own lenient prompt
    mem0 = {n for n in runs if n.startswith("mem0_")}
    assert len(mem0) == 8 and {runs[n].judge for n in mem0} == {"gpt-5/mem0"}
    assert {runs[n].judge_prompt for n in set(runs) - mem0} == {"published"}


def test_a_registry_of_ones_own_runs_that_is_not_yaml_is_one_line_naming_where(tmp_path):
    mine = tmp_path / "mine.yaml"
    mine.write_text("my_run:\n  repo: [someone/somewhere\n", encoding="utf-8")
    with pytest.raises(published.DataError) as caught:
        published.registry(mine)
    assert str(caught.value) == (
        f"{mine}: the registry of published runs is not valid YAML at line 3, column 1: "
        "expected ',' or ']', but got '<stream end>'"
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("- my_run\n- other\n", "must map each run's name to its fields"),
        ("my_run: [someone/somewhere]\n", "my_run: expected its fields (repo, commit, path, ...)"),
    ],
)
def test_a_registry_of_the_wrong_shape_is_one_line_naming_it(tmp_path, text, message):
    mine = tmp_path / "mine.yaml"
    mine.write_text(text, encoding="utf-8")
    with pytest.raises(published.DataError) as caught:
        published.registry(mine)
    assert str(caught.value).startswith(f"{mine}: ") and message in str(caught.value)


def test_a_runs_cost_from_the_tokens_its_file_records_or_counted_and_labelled(copies):
    from memcost.text import count_tokens

    frames = {
        name: published.read_published(name, published_dir=copies, cache_dir=copies)
        for name in ENTRIES
    }
    cost = published.published_cost(frames).set_index("name")
    assert set(cost.index) == {"mem0_run", "full_context_run", "zep_run"}  # probes answer nothing
    recorded = cost.loc["full_context_run"]
    # gpt-4o-mini at the paper's list price: $0.15 in, $0.60 out per 1M tokens
    assert recorded["usd"] == pytest.approx(0.15 + 0.1 * 0.60)
    assert not recorded["estimated"] and recorded["price_date"] == "2025-09-15"
    counted = cost.loc["mem0_run"]
    tokens = sum(count_tokens(a) for a in ["May 7", "A sunrise.", "A horse.", "At a bank."])
    assert counted["estimated"] and pd.isna(counted["prompt_tokens"])
    assert counted["completion_tokens"] == tokens
    assert counted["usd"] == pytest.approx(tokens * 0.60 / 1e6)
    assert "lower bound" in counted["note"]


@pytest.mark.timeout(600)
def test_notebook_08_reads_pairs_and_reports_the_runs(prepared_run, tmp_path):
    """Notebook 08 under the runner's papermill, on invented files in two schemas written for
    the bundled LoCoMo sample's own questions: its tables, figure, metrics and report section."""
    from memcost.run.report.page import write_report
    from memcost.run.runner import execute_notebook, study_notebooks

    run = prepared_run(("locomo",))
    sample = pd.read_parquet(run.dataset("locomo").questions)
    order = list(dict.fromkeys(sample["conversation_id"]))
    judged = sample[sample["category_id"] != 5]
    memory = {"evaluations": [
        {"question_id": f"c{order.index(r.conversation_id)}_{i}",
         "conversation_idx": order.index(r.conversation_id), "category": int(r.category_id),
         "question": r.question, "ground_truth_answer": r.answer, "search_latency_ms": 100.0 + i,
         "cutoff_results": {"top_10": {"judgment": "CORRECT" if i % 3 else "WRONG",
                                       "generated_answer": "an answer"}}}
        for i, r in enumerate(judged.itertuples())
    ]}  # fmt: skip
    detailed: dict[str, list] = {}
    for i, r in enumerate(judged.itertuples()):
        detailed.setdefault(f"user_{order.index(r.conversation_id)}", []).append(
            {"question_id": f"q{i}", "question": r.question.upper(), "golden_answer": r.answer,
             "generated_answer": "the whole history says so", "category": str(r.category_id),
             "llm_judgments": {"judgment_1": i % 2 == 0, "judgment_2": True, "judgment_3": False}}
        )  # fmt: skip
    full = {"detailed_results": detailed, "metadata": {"total_prompt_tokens": 2_000_000,
                                                       "total_completion_tokens": 0}}  # fmt: skip
    # a LongMemEval run: this run prepared no LongMemEval questions, its file alone scores it
    longmemeval = {"metadata": {"model": "gpt-5"}, "evaluations": [
        {"question_id": f"lme_{i}", "question_type": "temporal-reasoning",
         "question": f"How many days, {i}?", "ground_truth_answer": "3 days",
         "total_memories_retrieved": 50, "search_latency_ms": 0.0, "add_latency_total_ms": 0.0,
         "cutoff_results": {"top_50": {"judgment": "FAIL" if i == 2 else "PASS",
                                       "reason": "", "supporting_evidence": ""}}}
        for i in range(4)
    ]}  # fmt: skip
    folder, entries = tmp_path / "copies", {}
    folder.mkdir()
    for name, schema, kind, document in [
        ("sample_memory", "mem0_benchmarks", "memory", memory),
        ("sample_full_context", "judged_answers", "long_context", full),
        ("lme_memory", "mem0_benchmarks", "memory", longmemeval),
        ("absent_run", "mem0_benchmarks", "memory", memory),  # its copy is not in the folder
    ]:
        data = json.dumps(document).encode()
        if name != "absent_run":
            (folder / f"{name}.json").write_bytes(data)
        entries[name] = {
            "repo": "someone/somewhere", "commit": "b" * 40, "path": "x.json",
            "sha256": hashlib.sha256(data).hexdigest(), "license": "CC0-1.0",
            "dataset": "longmemeval" if name.startswith("lme") else "locomo",
            "kind": kind, "system": name, "answer_model": "gpt-4o-mini", "judge_model": "j",
            "votes": 1 if kind == "memory" else 3, "top_k": 10 if kind == "memory" else None,
            "schema": schema,
        }  # fmt: skip
    extra = tmp_path / "mine.yaml"
    extra.write_text(json.dumps(entries), encoding="utf-8")
    execute_notebook(
        study_notebooks()["08"],
        run.root / "notebooks" / "08_published_runs.ipynb",
        {"run_dir": str(run.root), "runs": list(entries), "published_dir": str(folder),
         "registry": str(extra), "n_bootstrap": 50, "rejudge": ["sample_memory"]},
    )  # fmt: skip
    accuracy = pd.read_csv(run.tables / "published_accuracy.csv").set_index("name")
    n = len(judged)
    assert accuracy.loc["sample_memory", "n"] == n  # every answer paired despite the new ids
    assert accuracy.loc["sample_memory", "correct"] == sum(1 for i in range(n) if i % 3)
    # votes (even i: T, T, F; odd i: F, T, F): the majority accepts the even ones
    assert accuracy.loc["sample_full_context", "correct"] == (n + 1) // 2
    # without LongMemEval's questions: scored from its own verdicts, three PASS of four
    lme = accuracy.loc["lme_memory"]
    assert (lme["dataset"], lme["n"], lme["correct"], lme["accuracy_pct"]) == (
        "longmemeval",
        4,
        3,
        75.0,
    )
    assert "absent_run" not in accuracy.index
    pairs = pd.read_csv(run.tables / "published_pairs.csv")
    assert pairs[["a", "b", "n_shared"]].values.tolist() == [
        ["sample_memory", "sample_full_context", n]
    ]
    cost = pd.read_csv(run.tables / "published_cost.csv").set_index("name")
    assert cost.loc["sample_full_context", "usd"] == pytest.approx(2 * 0.15)
    judges = pd.read_csv(run.tables / "published_judge_agreement.csv")
    # judged again offline: the lexical rule, named as such, on every paired answer, beside the
    # published judge; the cells of the 2x2 table add up and the first judge's accuracy is the
    # run's published one
    assert judges[["answers", "judge_a", "judge_b", "n"]].values.tolist() == [
        ["sample_memory", "j/published", "lexical/judge", n]
    ]
    cells = judges.iloc[0]
    assert cells[["both_correct", "a_only", "b_only", "both_wrong"]].sum() == n
    assert cells["both_correct"] + cells["a_only"] == accuracy.loc["sample_memory", "correct"]
    assert cells["accuracy_a_pct"] == pytest.approx(accuracy.loc["sample_memory", "accuracy_pct"])
    # what survives the judge: the rejudged run's two accuracies; the two LoCoMo runs share
    # their published judge, under which the memory run leads on the 27 shared questions
    spread = pd.read_csv(run.tables / "published_judge_spread.csv").set_index("answers")
    low, high = sorted([cells["accuracy_a_pct"], cells["accuracy_b_pct"]])
    assert spread.loc["sample_memory", ["judges", "low_pct", "high_pct"]].tolist() == pytest.approx(
        [2, low, high]
    )
    order = pd.read_csv(run.tables / "published_order_under_judges.csv")
    lead = (
        accuracy.loc["sample_memory", "accuracy_pct"]
        - accuracy.loc["sample_full_context", "accuracy_pct"]
    )
    assert order[["a", "b", "judges", "n_shared", "holds"]].values.tolist() == [
        ["sample_memory", "sample_full_context", 1, n, True]
    ]
    assert order.loc[0, "lead_min_pts"] == pytest.approx(lead)
    # three votes an answer, never unanimous (T, T, F or F, T, F)
    votes = pd.read_csv(run.tables / "published_vote_agreement.csv").set_index("name")
    assert list(votes.index) == ["sample_full_context"]
    assert votes.loc["sample_full_context", ["n", "unanimous_pct"]].tolist() == [n, 0.0]
    assert (run.figures / "published_accuracy.png").is_file()
    assert (run.figures / "published_judges.png").is_file()  # sample_memory has two judges
    assert (run.root / "published" / "aligned.parquet").is_file()
    # the same votes in this repository's judgments format: one per vote, read by its reader
    from memcost.answers import read_judgments

    votes = read_judgments(run.root / "published" / "locomo" / "judgments.jsonl")
    assert votes.groupby("system").size().to_dict() == {"sample_memory": n,
                                                        "sample_full_context": 3 * n}  # fmt: skip
    answers = (run.root / "published" / "locomo" / "answers_sample_memory.jsonl").read_text()
    assert len(answers.splitlines()) == n and '"backend":"published"' in answers
    metrics = json.loads((run.root / "metrics" / "08_published_runs.json").read_text())
    assert [p["paired"] for p in metrics["metrics"]["paired"]] == [n, n, 0]
    # the run whose file is missing is left out with its reason; the others went on
    assert metrics["metrics"]["missing"] == {
        "absent_run": f"{folder / 'absent_run.json'}: not found; published_dir must hold "
        f"absent_run.json (from {published.GITHUB_RAW}/someone/somewhere/{'b' * 40}/x.json)"
    }
    report = write_report(run)[0].read_text(encoding="utf-8")
    brief = report.split("## The answer in brief", 1)[1].split("\n## ", 1)[0]
    assert "**What real systems scored on these questions**" in brief
    assert "re-analysed): LoCoMo: memory " in brief  # datasets named as everywhere else
    assert (
        f"the same answers score {low:.1f}–{high:.1f}% depending on the judge (sample_memory: "
    ) in brief
    assert "**What survives the judge**" in report
    # notebooks run without the runner: not "with their defaults" (these had parameters)
    assert "**What ran:** notebooks run without a preset (by hand or by papermill), " in brief
    assert "## Published runs of real systems (notebook 08)" in report
    # notebooks 04 and 05 did not run: no empty judge line, and the cost section says why
    assert "Judge (the paper's" not in report
    assert "*No usage ledger was analysed (notebook 05 did not run).*" in report
    assert "| sample_memory | memory | gpt-4o-mini | j × 1 |" in report
    assert "| lme_memory | memory | gpt-4o-mini | j × 1 | 4 | 75.00% |" in report
    assert "**Left out**: no copy of the file where this run could read it" in report
    assert "**Answers that match no question of this run:** lme_memory (4 of 4). They" in report
    assert f"| absent_run | {folder / 'absent_run.json'}: not found;" in report
    assert f"| sample_memory | j/published | lexical/judge | {n} |" in report
    offline_judge = "; `lexical`: this repository's offline rule, not an LLM"
    assert offline_judge in report
    assert f"| sample_full_context | j × 3 | {n} | 0.0% |" in report
    # judged again by a model: the heading no longer calls a judge the lexical rule
    judges.assign(judge_b="gpt-5-mini/judge").to_csv(
        run.tables / "published_judge_agreement.csv", index=False
    )
    rejudged = write_report(run)[0].read_text(encoding="utf-8")
    assert f"| sample_memory | j/published | gpt-5-mini/judge | {n} |" in rejudged
    two_judges = rejudged.split("**The same answers under two judges**", 1)[1].split("\n**")[0]
    assert offline_judge not in two_judges and "lexical/" not in two_judges
    assert "-0.00" not in rejudged  # the lexical judge rejects all: kappa 0, however rounded
    # the runner's last lines say it as the report's first screen does
    from memcost.cli import result_lines

    assert result_lines(run)[0].startswith(
        "What real systems scored on these questions (their published answers and judgments, "
        "re-analysed): LoCoMo: memory "
    )
    # every file's pin and where its bytes were read from
    digest = entries["sample_memory"]["sha256"][:12]
    assert (
        f"| sample_memory | sample_memory | someone/somewhere @ {'b' * 12} : x.json | {digest}… "
        f"| {folder / 'sample_memory.json'} |"
    ) in report
    assert [s["read_from"] for s in metrics["metrics"]["sources"]] == [
        str(folder / f"{name}.json") for name in entries if name != "absent_run"
    ]


def test_published_answers_judged_again_through_the_client(
    copies, run_paths, tmp_path, monkeypatch
):
    """With a key (here the local server that answers each stage's prompts), this repository's
    judge judges the published answers again: one request per vote, the verdicts set beside the
    published judge's on the same answers."""
    from fake_api.stages import stage_server
    from llm_helpers import TEST_KEY, api_client

    from memcost.answers import read_judgments
    from memcost.judge import run_judging
    from memcost_published import agreement

    questions = QUESTIONS.assign(
        category=lambda f: f["category_id"].map({1: "multi_hop", 2: "temporal", 4: "single_hop",
                                                 5: "adversarial"}),
        answer="an answer", is_abstention=lambda f: f["category_id"] == 5,
    )  # fmt: skip
    frame = aligned(copies)
    plan = published.judge_plan(frame, questions, "locomo", ["mem0_run", "full_context_run"])
    # conv-26-q2 is adversarial (category 5): not scored; the Mem0 run lacks conv-30-q1
    assert {k: len(v) for k, v in plan.items.items()} == {"mem0_run": 4, "full_context_run": 5}
    assert plan.missing_answers["mem0_run"] == ["conv-30-q1"]
    monkeypatch.setenv("OPENAI_API_KEY", TEST_KEY)
    with stage_server(api_key=TEST_KEY, faults=False) as server:
        client = api_client(run_paths, server.url, tmp_path)
        path = tmp_path / "judgments.jsonl"
        run_judging(client, plan, path, judge_model="gpt-5-mini-2025-08-07", n_votes=1)
        client.close()
        # a vote per answer; the full-context run's two answers to "What did Melanie paint?"
        # are one request (same question, reference and answer): the second from the store
        assert len(server.requests) == 8
    votes = read_judgments(path)
    assert set(votes["backend"]) == {"openai"} and len(votes) == 9
    verdicts = pd.concat(
        [agreement.published_verdicts(frame), agreement.repository_verdicts(votes)]
    )
    table = agreement.judge_agreement(verdicts).set_index("answers")
    # the server's judge accepts an answer that shares words with "an answer": all of them
    full = table.loc["full_context_run"]
    assert (full["judge_a"], full["judge_b"]) == ("j/published", "gpt-5-mini-2025-08-07/judge")
    assert full[["n", "accuracy_a_pct", "accuracy_b_pct"]].tolist() == [5, 60.0, 100.0]
    # the published judge rejected two answers this one accepted; nothing the other way
    assert full[["both_correct", "a_only", "b_only", "both_wrong"]].tolist() == [3, 0, 2, 0]
    assert full["cohen_kappa"] == pytest.approx(0.0)  # b accepts everything: no agreement beyond
    assert full["p_value"] == pytest.approx(0.5)  # two discordant answers, both one way
    assert table.loc["mem0_run", "n"] == 4


def test_a_download_is_checked_kept_and_read_from_the_cache_next_time(
    copies, tmp_path, monkeypatch
):
    import functools
    import http.server
    import threading

    # the repository's raw-file host, served from a folder laid out as repo/commit/path
    root = tmp_path / "host"
    target = root / "someone" / "somewhere" / ("a" * 40) / "zep_run.json"
    target.parent.mkdir(parents=True)
    target.write_bytes((copies / "zep_run.json").read_bytes())
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    handler.log_message = lambda *a: None  # type: ignore[attr-defined]
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setattr(published, "GITHUB_RAW", f"http://127.0.0.1:{server.server_port}")
    cache = tmp_path / "cache"
    try:
        frame = published.read_published("zep_run", cache_dir=cache)
        assert frame.attrs["origin"].startswith("http://127.0.0.1") and len(frame) == 3
        with pytest.raises(
            DataError, match=r"could not download gold_run from http.*published_dir"
        ):
            published.read_published("gold_run", cache_dir=cache)  # not on the host: 404
        # the host serves other bytes than the pin: refused, and nothing kept in the cache
        (target.parent / "probe_run.json").write_text("{}")
        with pytest.raises(DataError, match=r"is not the pinned .*; the download is not kept"):
            published.read_published("probe_run", cache_dir=cache)
        assert not (cache / ("a" * 12) / "probe_run.json").exists()
    finally:
        server.shutdown()
        server.server_close()
    kept = cache / ("a" * 12) / "zep_run.json"
    assert kept.read_bytes() == target.read_bytes()
    again = published.read_published("zep_run", cache_dir=cache)  # the host is gone
    assert again.attrs["origin"] == str(kept) and again.equals(frame)


def test_the_mem0_evaluation_harness_schema_pairs_by_position_and_text():
    """Memobase's published grades (Mem0's paper's harness): conversations keyed by position,
    no ids, one llm_score per answer."""
    document = {
        "1": [{"question": "Where does Jon work?", "answer": "a bank", "response": "A bank.",
               "category": "1", "bleu_score": 0.5, "f1_score": 1.0, "llm_score": 1}],
        "0": [{"question": "What did Melanie paint?", "answer": "x", "response": "y",
               "category": "4", "bleu_score": 0, "f1_score": 0.0, "llm_score": 0}],
    }  # fmt: skip
    frame = pd.DataFrame(
        published.PARSERS["mem0_evaluation"](document), columns=published.COLUMNS[1:]
    )
    frame.insert(0, "run", "memobase")
    out = published.align(frame, QUESTIONS, "locomo")
    assert out["question_id"].tolist() == ["conv-30-q0", "conv-26-q1"]
    assert out["votes"].tolist() == [(True,), (False,)]
    assert out["category"].tolist() == ["multi_hop", "single_hop"]


def test_runs_left_out_for_want_of_a_file_are_named_in_the_last_lines_and_the_report(tmp_path):
    from memcost.cli import result_lines
    from memcost.io import write_json
    from memcost.paths import RunPaths
    from memcost.run.report.view import RunView
    from memcost_published.report import section_published

    run = RunPaths(tmp_path / "run").ensure()
    why = "/copies/x.json: not found; published_dir must hold x.json (from https://example/x.json)"
    write_json(
        run.metrics / "08_published_runs.json", {"metrics": {"runs": ["x"], "missing": {"x": why}}}
    )
    assert result_lines(run)[0] == (
        "What real systems scored on these questions: no published run was read: each needs its "
        "file in published_dir, the download cache or a download."
    )
    section = section_published(RunView.load(run))
    assert section[2] == "**Left out**: no copy of the file where this run could read it"
    assert f"| x | {why} |" in section[4]
    assert section[-2] == (
        "No published run was read: each needs its file in published_dir, the download cache or "
        "a download."
    )


def test_a_judges_repeated_votes_agree_as_fleiss_kappa_counts_them(copies):
    from memcost_published.agreement import fleiss_kappa, vote_agreement

    table = vote_agreement(aligned(copies)).set_index("name")
    # the runs whose files hold three votes per answer; Mem0's and Zep's hold one
    assert list(table.index) == ["full_context_run", "probe_run"]
    # full context, accepts per answer 2, 1, 3, 1, 3 of 3: per-answer agreement 1/3, 1/3, 1,
    # 1/3, 1 (mean 0.6); accepts overall 10 of 15, chance (2/3)^2 + (1/3)^2 = 5/9;
    # kappa (0.6 - 5/9) / (1 - 5/9) = 0.1
    row = table.loc["full_context_run"]
    assert (row["judge_model"], row["votes"], row["n"], row["unanimous_pct"]) == ("j", 3, 5, 40.0)
    assert row["fleiss_kappa"] == pytest.approx(0.1)
    # the probe: accepts 2, 0, 1, 0, 0: mean agreement 11/15, chance 0.2^2 + 0.8^2 = 0.68
    assert table.loc["probe_run", "unanimous_pct"] == 60.0
    assert table.loc["probe_run", "fleiss_kappa"] == pytest.approx(1 / 6)
    # every vote the same: agreement by chance is total, kappa undefined
    assert np.isnan(fleiss_kappa([(True, True, True)] * 4))
    assert fleiss_kappa([(True, True), (False, False)]) == pytest.approx(1.0)


def test_cohens_kappa_is_agreement_beyond_the_judges_own_accept_rates():
    from memcost_published.agreement import cohen_kappa

    # agree on 3 of 4; accept rates 1/2 and 1/4: chance 1/2 * 1/4 + 1/2 * 3/4 = 1/2
    assert cohen_kappa([True, True, False, False], [True, False, False, False]) == 0.5
    assert cohen_kappa([True, False], [False, True]) == -1.0
    assert np.isnan(cohen_kappa([True, True], [True, True]))


def test_what_survives_the_judge_the_spread_of_each_run_and_whether_an_order_holds():
    from memcost_published.agreement import judge_spread, order_under_judges

    marks = {
        ("X", "j1"): "TTFF", ("X", "j2"): "TTTF",  # 50% and 75%
        ("Y", "j1"): "TFFF", ("Y", "j2"): "TTTT",  # 25% and 100%
        ("Z", "j3"): "TTTT",  # a judge of its own
    }  # fmt: skip
    verdicts = pd.DataFrame(
        [
            {"answers": a, "question_id": f"q{i}", "judge": j, "accepted": mark == "T"}
            for (a, j), marks_ in marks.items()
            for i, mark in enumerate(marks_)
        ]
    )
    spread = judge_spread(verdicts).set_index("answers")
    assert spread.loc["X"].tolist() == [2, 50.0, "j1", 75.0, "j2"]
    assert spread.loc["Y"].tolist() == [2, 25.0, "j1", 100.0, "j2"]
    assert spread.loc["Z", ["judges", "low_pct", "high_pct"]].tolist() == [1, 100.0, 100.0]
    order = order_under_judges(verdicts)
    # X leads Y by 25 points under j1 and trails it by 25 under j2: the order does not hold; Z
    # shares no judge with either, so it is compared with neither
    assert order.values.tolist() == [["X", "Y", 2, 4, -25.0, 25.0, False]]
    same = verdicts[verdicts["judge"] == "j1"]
    assert order_under_judges(same)["holds"].tolist() == [True]


def test_the_judges_figure_sets_each_judge_of_the_same_answers_side_by_side():
    import matplotlib.pyplot as plt

    from memcost_published.plots import plot_judges

    marks = {
        ("mem0", "gpt-5/mem0"): "TTTT", ("mem0", "gpt-5/strict"): "TFFF",
        ("mem0", "gpt-4o/mem0"): "TTTF", ("zep", "gpt-4o-mini/published"): "TTFF",
    }  # fmt: skip
    verdicts = pd.DataFrame(
        [
            {"answers": a, "question_id": f"q{i}", "judge": j, "accepted": mark == "T"}
            for (a, j), marks_ in marks.items()
            for i, mark in enumerate(marks_)
        ]
    )
    figure = plot_judges(verdicts)
    (ax,) = figure.axes
    labels = sorted(t.get_text() for t in ax.texts)
    # only the answers judged more than once; each judge's share and, inside [0, 1], its
    # Wilson interval (at 4 of 4 the upper bound is 100%)
    assert labels == ["gpt-4o/mem0  75.0%", "gpt-5/mem0  100.0%", "gpt-5/strict  25.0%"]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["mem0\n(4 answers)"]
    ends = sorted(
        round(x, 1) for line in ax.lines for x in line.get_xdata() if line.get_xdata().size
    )
    assert max(ends) == 100.0 and min(ends) >= 0
    plt.close(figure)
    assert plot_judges(verdicts[verdicts["answers"] == "zep"]) is None
