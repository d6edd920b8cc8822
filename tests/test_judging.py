"""The judge: dataset-aware instructions, multiple choice, votes through the real client, the
lexical rule, UNJUDGED handling, resuming, and the tables built from the votes."""

from __future__ import annotations

import json
import subprocess
import sys

import pandas as pd
import pytest
from fake_api.openai_server import CHAT_PATH, FakeOpenAIServer
from llm_helpers import TEST_KEY, api_client

from memcost import answers, data, judge
from memcost.answers import JUDGMENT_FIELDS, AnswerWriter
from memcost.calls import read_calls
from memcost.io import read_jsonl
from memcost.judge.questions import LME_TYPES, JudgeItem, choose_instruction, load_questions
from memcost.judge.votes import LETTER_MATCH, parse_verdict
from memcost.llm import make_client
from memcost.offline import LEXICAL, lexical_verdict
from memcost.prompts import INSTRUCTIONS
from memcost.stats import CORRECT, WRONG

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


def prepared(run_paths, dataset: str):
    ds = run_paths.dataset(dataset).ensure()
    data.write_prepared(ds, data.prepare(data.load(data.resolve_source(dataset))))
    return ds, pd.read_parquet(ds.questions)


def write_answers(ds, system: str, questions: pd.DataFrame, answer, **extra) -> None:
    with AnswerWriter(ds, system) as writer:
        for i, row in enumerate(questions.itertuples()):
            text = answer(i, row)
            record = dict(
                BASE,
                question_id=row.question_id,
                conversation_id=row.conversation_id,
                answer=text if isinstance(text, str) else "",
                **extra,
            )
            if not isinstance(text, str):  # an answering call that failed
                record["error"] = "HTTP 500 after 4 attempts"
            writer.write(record)


def offline_client(run_paths):
    return make_client(run_paths, progress=False)


# ---------------------------------------------------------------------------------------------
# Instructions and scoring rules
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("category", "question_id", "expected"),
    [
        ("single-session-user", "a1", "lme_contains"),
        ("single-session-assistant", "a2", "lme_contains"),
        ("multi-session", "a3", "lme_contains"),
        ("temporal-reasoning", "a4", "lme_temporal"),
        ("knowledge-update", "a5", "lme_knowledge_update"),
        ("single-session-preference", "a6", "lme_preference"),
        ("single-session-user", "a7_abs", "lme_abstention"),
        ("multi-session", "a8_abs", "lme_abstention"),
        ("temporal-reasoning", "a9_abs", "lme_abstention"),
    ],
)
def test_longmemeval_instruction_per_question_type(category, question_id, expected):
    instruction = choose_instruction("longmemeval", category, question_id)
    assert instruction.key == expected
    if expected == "lme_temporal":
        assert "off by one" in instruction.text
    if expected == "lme_preference":
        assert instruction.reference_label == "Rubric"
    if expected == "lme_abstention":
        assert instruction.reference_label == "Explanation"


def test_other_datasets_and_unknown_types():
    assert choose_instruction("locomo", "temporal").key == "locomo_temporal"
    assert choose_instruction("locomo", "adversarial").key == "locomo_adversarial"
    assert choose_instruction("locomo", "single_hop").key == "locomo"
    assert choose_instruction("personamem_v2", "ask_to_forget").key == "personamem"
    with pytest.raises(ValueError, match="no grading instruction"):
        choose_instruction("longmemeval", "made-up-type", "q1")


def test_every_bundled_longmemeval_question_gets_its_instruction(run_paths):
    ds, questions = prepared(run_paths, "longmemeval")
    write_answers(ds, "memory_mem0_style", questions, lambda i, r: r.answer)
    plan = judge.plan_judging(ds, questions, dataset="longmemeval")
    chosen = {i.question_id: i.instruction.key for i in plan.items["memory_mem0_style"]}
    for row in questions.itertuples():
        if row.question_id.endswith("_abs"):
            assert chosen[row.question_id] == "lme_abstention"
        else:
            assert chosen[row.question_id] == LME_TYPES[row.category]
    request = judge.judge_requests([plan.items["memory_mem0_style"][2]], n_votes=1)[0]
    user = request.messages[-1][1]
    assert "Rubric:" in user and "personal information" in user  # the preference question
    assert request.prompt_version == "judge@v1+lme_preference@v1"


def test_questions_the_oracle_cannot_be_asked_are_left_out_not_failures(run_paths):
    """LoCoMo has questions without evidence (4 of the real file's 1,540 scored, one more whose
    evidence names no turn of its conversation): notebook 03 does not ask the oracle them, and
    the judge leaves them out of its accuracy instead of counting them missing answers (which
    the report's first screen called failures of a clean run)."""
    from memcost import longctx

    ds, questions = prepared(run_paths, "locomo")
    scored = questions.loc[questions["category"] != "adversarial"]
    cut = scored["question_id"].iloc[[0, 5]].tolist()
    questions["evidence"] = [
        [] if q == cut[0] else ["D99:1"] if q == cut[1] else e
        for q, e in zip(questions["question_id"], questions["evidence"], strict=True)
    ]
    planned = longctx.plan_questions(
        questions,
        longctx.build_histories(pd.read_parquet(ds.conversations)),
        models=["gpt-5-mini-2025-08-07"],
        baseline_models=["gpt-5-mini-2025-08-07"],
        kinds=("oracle",),
    )
    longctx.answer_questions(offline_client(run_paths), ds, planned, dataset="locomo")
    plan = judge.plan_judging(ds, questions, dataset="locomo")
    oracle = "oracle_gpt-5-mini"
    assert plan.missing_answers[oracle] == []
    assert len(plan.items[oracle]) == len(scored) - 2
    assert f"NOTE: {oracle}: 2 question(s) not asked (" in plan.describe()
    # notebook 03 again, the oracle too (no row twice), then without it (its rows stay: its
    # answers are still judged)
    client = offline_client(run_paths)
    longctx.answer_questions(client, ds, planned, dataset="locomo")
    lc_only = longctx.plan_questions(
        questions,
        longctx.build_histories(pd.read_parquet(ds.conversations)),
        models=["gpt-5-mini-2025-08-07"],
    )
    longctx.answer_questions(client, ds, lc_only, dataset="locomo")
    kept = pd.read_csv(answers.not_asked_path(ds))
    assert sorted(kept["question_id"]) == sorted(cut) and set(kept["system"]) == {oracle}
    assert judge.plan_judging(ds, questions, dataset="locomo").missing_answers[oracle] == []
    answers.not_asked_path(ds).unlink()  # an answers file alone: they would be missing
    assert sorted(judge.plan_judging(ds, questions, dataset="locomo").missing_answers[oracle]) == (
        sorted(cut)
    )


def test_locomo_category_5_excluded_by_default_and_included_on_request(run_paths):
    ds, questions = prepared(run_paths, "locomo")
    write_answers(
        ds, "memory_mem0_style", questions, lambda i, r: "Not mentioned in the conversation"
    )
    adversarial = int((questions["category"] == "adversarial").sum())
    assert adversarial == 6
    plan = judge.plan_judging(ds, questions, dataset="locomo")
    assert len(plan.questions) == len(questions) - adversarial
    assert plan.excluded == {"adversarial (LoCoMo category 5)": adversarial}
    assert all(i.category != "adversarial" for i in plan.items["memory_mem0_style"])
    assert "scoring 27 of 33" in plan.describe()
    plan = judge.plan_judging(ds, questions, dataset="locomo", include_adversarial=True)
    assert len(plan.questions) == len(questions) and not any(plan.excluded.values())
    item = next(i for i in plan.items["memory_mem0_style"] if i.category == "adversarial")
    assert item.instruction.key == "locomo_adversarial"
    assert (
        item.adversarial_answer and item.adversarial_answer in item.prompt_values()["instructions"]
    )
    assert lexical_verdict(item)[0] == CORRECT  # it said "not mentioned"


def item(reference: str, response: str, key: str = "locomo", **fields) -> JudgeItem:
    return JudgeItem(
        dataset="locomo",
        system="memory_mem0_style",
        question_id="q",
        conversation_id="c",
        category="single_hop",
        question="?",
        reference=reference,
        response=response,
        instruction=INSTRUCTIONS[key],
        **fields,
    )


@pytest.mark.parametrize(
    ("reference", "response", "key", "label"),
    [
        ("A beagle", "Jonas has a beagle called Pretzel.", "locomo", "CORRECT"),
        ("A beagle", "A golden retriever.", "locomo", "WRONG"),
        ("9 April 2023", "He ran it on April 9th, 2023.", "locomo", "CORRECT"),
        ("3", "Three times a week now.", "locomo", "CORRECT"),
        ("Porto", "I don't know.", "locomo", "WRONG"),
        ("17 days. 18 days is also acceptable.", "It took 16 days.", "lme_temporal", "CORRECT"),
        ("17 days.", "It took 25 days.", "lme_temporal", "WRONG"),
        (
            "Three times a week",
            "She used to go twice, now three times a week.",
            "lme_knowledge_update",
            "CORRECT",
        ),
        ("Not enough info: no cat.", "You never mentioned a cat.", "lme_abstention", "CORRECT"),
        ("Not enough info: no cat.", "Your cat is called Miso.", "lme_abstention", "WRONG"),
    ],
)
def test_lexical_rule(reference, response, key, label):
    assert lexical_verdict(item(reference, response, key))[0] == label


def test_lexical_variants_differ_on_verbose_answers():
    verbose = item(
        "A used Fujifilm X-T2",
        "He bought a camera, I think it was a used Fujifilm "
        "X-T2 or maybe something similar, for landscapes and travel photos.",
    )
    assert lexical_verdict(verbose, "judge_lenient")[0] == CORRECT
    assert lexical_verdict(verbose, "judge")[0] == CORRECT
    assert lexical_verdict(verbose, "judge_strict")[0] == WRONG


@pytest.mark.parametrize(
    ("reply", "label"),
    [
        ('{"reason": "same breed", "label": "CORRECT"}', "CORRECT"),
        ('```json\n{"reason": "x", "label": "wrong"}\n```', "WRONG"),
        ('Sure: {"verdict": "INCORRECT", "reason": "no"}', "WRONG"),
        ("CORRECT.", "CORRECT"),
    ],
)
def test_parse_verdict(reply, label):
    assert parse_verdict(reply)["label"] == label


@pytest.mark.parametrize(
    "reply",
    ["I think it's fine", '{"label": "MAYBE"}', '{"reason": "x"}', "The answer is not CORRECT"],
)
def test_parse_verdict_refuses_what_it_cannot_read(reply):
    with pytest.raises(ValueError):
        parse_verdict(reply)


# ---------------------------------------------------------------------------------------------
# PersonaMem multiple choice
# ---------------------------------------------------------------------------------------------
OPTIONS = ["right answer", "wrong one", "wrong two", "wrong three"]


def test_multiple_choice_shuffle_is_identical_across_processes():
    ids = [f"pm-{i}" for i in range(40)]
    here = {
        q: [
            *answers.multiple_choice(q, OPTIONS).options,
            answers.multiple_choice(q, OPTIONS).correct_letter,
        ]
        for q in ids
    }
    script = (
        "import json, sys\nfrom memcost import answers, judge\n"
        f"ids = {ids!r}\nopts = {OPTIONS!r}\n"
        "out = {q: [*answers.multiple_choice(q, opts).options, "
        "answers.multiple_choice(q, opts).correct_letter] for q in ids}\n"
        "print(json.dumps(out))\n"
    )
    for seed in ("0", "12345"):  # different str-hash salts in the two processes
        out = subprocess.run(
            [sys.executable, "-c", script],
            capture_output=True,
            text=True,
            check=True,
            env={"PYTHONHASHSEED": seed, "PATH": ""},
        )
        assert json.loads(out.stdout) == here
    letters = [v[-1] for v in here.values()]
    assert len(set(letters)) == 4  # the correct option is not always in the same place
    mc = answers.multiple_choice("pm-3", OPTIONS)
    assert mc.option(mc.correct_letter) == "right answer"
    assert mc.render().splitlines()[0].startswith("A. ")


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("B", "B"),
        ("(c)", "C"),
        ("**D.**", "D"),
        ("Answer: A", "A"),
        ("I'd pick option C.", "C"),
        ("B) because it fits", "B"),
        ("The answer is a dog", None),
        ("B or C", None),
        ("", None),
    ],
)
def test_parse_choice(reply, expected):
    assert answers.parse_choice(reply, answers.multiple_choice("pm-1", OPTIONS)) == expected


def test_multiple_choice_is_scored_by_letter(run_paths):
    ds, questions = prepared(run_paths, "personamem_v2")

    def letter(i, row):
        mc = answers.multiple_choice(row.question_id, list(row.options))
        wrong = next(x for x in mc.letters if x != mc.correct_letter)
        return [
            mc.correct_letter,
            f"Answer: {wrong}",
            "none of these",
            mc.option(mc.correct_letter),
        ][i % 4]

    write_answers(ds, "memory_mem0_style", questions, letter, mode="multiple_choice")
    with pytest.raises(ValueError, match="mode"):
        judge.plan_judging(ds, questions, dataset="personamem_v2")  # answers say MC
    plan = judge.plan_judging(ds, questions, dataset="personamem_v2", mode="multiple_choice")
    result = judge.run_judging(offline_client(run_paths), plan, ds.judgments)
    assert result.sent == 0 and not read_calls(run_paths.calls)  # no calls
    labels = result.judgments.set_index("question_id")["label"]
    assert len(labels) == len(questions)  # one vote per question
    expected = ["CORRECT", "WRONG", "WRONG", "CORRECT"]
    assert labels.tolist() == [expected[i % 4] for i in range(len(questions))]
    assert set(result.judgments["judge_model"]) == {LETTER_MATCH}
    locomo, locomo_questions = prepared(run_paths, "locomo")
    write_answers(locomo, "memory_mem0_style", locomo_questions, lambda i, r: r.answer)
    plan = judge.plan_judging(locomo, locomo_questions, dataset="locomo", mode="multiple_choice")
    assert plan.mode == "open_ended" and "personamem_v2 only" in plan.describe()


# ---------------------------------------------------------------------------------------------
# Votes through the client
# ---------------------------------------------------------------------------------------------
def _verdict_from_prompt(body: dict) -> str:
    user = [m["content"] for m in body["messages"] if m["role"] == "user"][0]
    response = user.split("Response to grade: ", 1)[1].split("\n", 1)[0]
    reference = user.split("Reference answer: ", 1)[1].split("\n", 1)[0]
    label = "CORRECT" if reference.lower() in response.lower() else "WRONG"
    return json.dumps({"reason": "compared", "label": label})


@pytest.fixture
def key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", TEST_KEY)


def small_locomo(run_paths, n: int = 4):
    ds, questions = prepared(run_paths, "locomo")
    questions = questions.loc[questions["category"] == "single_hop"].head(n)
    return ds, questions


def test_three_votes_are_three_requests_at_the_server(run_paths, tmp_path, key):
    ds, questions = small_locomo(run_paths)
    write_answers(
        ds, "memory_mem0_style", questions, lambda i, r: f"It is {r.answer}" if i % 2 else "no"
    )
    with FakeOpenAIServer(api_key=TEST_KEY, responder=_verdict_from_prompt) as server:
        client = api_client(run_paths, server.url, tmp_path)
        plan = judge.plan_judging(ds, questions, dataset="locomo")
        result = judge.run_judging(client, plan, ds.judgments, n_votes=3)
        assert server.count(CHAT_PATH) == 3 * len(questions)
        bodies = [r.body for r in server.requests]
        assert all(
            b["reasoning_effort"] == "high" and b["model"] == "gpt-5-mini-2025-08-07"
            for b in bodies
        )
    calls = read_calls(run_paths.calls)
    assert len(calls) == 3 * len(questions)
    assert {c["stage"] for c in calls} == {"judge"}
    per_question = {}
    for c in calls:
        assert (
            c["system"] == "memory_mem0_style" and c["dataset"] == "locomo" and c["cached"] is False
        )
        assert c["vote"] == c["sample_index"]
        per_question.setdefault(c["question_id"], []).append(c)
    for records in per_question.values():
        assert sorted(c["sample_index"] for c in records) == [0, 1, 2]
        assert len({c["request_hash"] for c in records}) == 3
    votes = result.judgments
    assert len(votes) == 3 * len(questions)
    assert set(votes["judge_model"]) == {"gpt-5-mini-2025-08-07"}
    assert set(votes["backend"]) == {"openai"}
    table = judge.accuracy_table(votes, dataset="locomo")
    assert table.loc[0, "accuracy"] == 0.5 and table.loc[0, "n"] == len(questions)


def test_an_unparseable_reply_ends_unjudged_never_wrong(run_paths, tmp_path, key):
    ds, questions = small_locomo(run_paths, n=2)
    write_answers(ds, "memory_mem0_style", questions, lambda i, r: r.answer)
    first = questions["question_id"].iloc[0]

    def responder(body: dict) -> str:
        user = [m["content"] for m in body["messages"] if m["role"] == "user"][0]
        question = questions.set_index("question_id").loc[first, "question"]
        if question in user:
            return "Looks fine to me!"  # never JSON, whatever the re-ask says
        return '{"reason": "ok", "label": "CORRECT"}'

    with FakeOpenAIServer(api_key=TEST_KEY, responder=responder) as server:
        client = api_client(run_paths, server.url, tmp_path, max_reasks=2)
        plan = judge.plan_judging(ds, questions, dataset="locomo")
        result = judge.run_judging(client, plan, ds.judgments, n_votes=3)
        # 3 votes × (1 + 2 re-asks) for the bad question, 3 for the other
        assert server.count(CHAT_PATH) == 3 * 3 + 3
    votes = result.judgments.set_index(["question_id", "vote"])
    assert (votes.loc[first, "label"] == judge.UNJUDGED).all()
    assert (votes.loc[first, "unjudged_cause"] == "judge").all()
    assert votes.loc[first, "reason"].str.contains("unparseable").all()
    table = judge.accuracy_table(result.judgments, dataset="locomo").iloc[0]
    assert (table["n"], table["judged"], table["unjudged"], table["judge_failures"]) == (2, 1, 1, 1)
    assert table["accuracy"] == 1.0 and table["strict_accuracy"] == 0.5
    reask = [c for c in read_calls(run_paths.calls) if c.get("reask")]
    assert len(reask) == 6 and all("json_reask" in c["prompt_version"] for c in reask)


# ---------------------------------------------------------------------------------------------
# The offline run: records, errors, bad input, resuming
# ---------------------------------------------------------------------------------------------
def test_offline_votes_say_lexical_and_answer_errors_are_not_judged(run_paths):
    ds, questions = prepared(run_paths, "locomo")
    write_answers(ds, "memory_mem0_style", questions, lambda i, r: None if i == 0 else r.answer)
    write_answers(ds, "long_context_gpt-5-mini", questions, lambda i, r: "I don't know")
    plan = judge.plan_judging(ds, questions, dataset="locomo")
    result = judge.run_judging(offline_client(run_paths), plan, ds.judgments, n_votes=3)
    votes = result.judgments
    assert list(votes.columns) == list(JUDGMENT_FIELDS)
    judged = votes.loc[votes["unjudged_cause"].isna()]
    assert set(judged["judge_model"]) == {"lexical"} and set(judged["backend"]) == {"offline"}
    errors = votes.loc[votes["unjudged_cause"] == "answer"]
    assert len(errors) == 3 and set(errors["label"]) == {"UNJUDGED"}
    assert set(errors["judge_model"]) == {"lexical"}
    calls = read_calls(run_paths.calls)
    assert len(calls) == 3 * (27 - 1) + 3 * 27  # the errored answer was never sent
    assert all(c["model"] == "gpt-5-mini-2025-08-07" and c["backend"] == "offline" for c in calls)
    table = judge.accuracy_table(votes, dataset="locomo").set_index("system")
    assert table.loc["memory_mem0_style", "answer_errors"] == 1
    assert table.loc["memory_mem0_style", "accuracy"] == 1.0
    assert table.loc["memory_mem0_style", "strict_accuracy"] == pytest.approx(26 / 27)
    # questions a system left unanswered (the oracle where no session holds the evidence)
    # count as wrong in strict accuracy, over all the questions, as the paper divides
    missing = {"memory_mem0_style": ["q-x", "q-y", "q-z"]}
    unanswered = judge.accuracy_table(votes, dataset="locomo", missing_answers=missing)
    row = unanswered.set_index("system").loc["memory_mem0_style"]
    assert row["missing_answers"] == 3 and row["accuracy"] == 1.0
    assert row["strict_accuracy"] == pytest.approx(26 / 30)
    assert table.loc["long_context_gpt-5-mini", "accuracy"] == 0.0
    assert (table["judge_model"] == "lexical").all()
    paired = judge.mcnemar_table(votes, dataset="locomo").iloc[0]
    assert (paired["n_paired"], paired["a_only_correct"], paired["b_only_correct"]) == (26, 26, 0)


def test_bad_input(run_paths):
    ds, questions = prepared(run_paths, "locomo")
    with pytest.raises(FileNotFoundError, match="02_answer_from_memory.*03_answer_long_context"):
        judge.plan_judging(ds, questions, dataset="locomo")
    with pytest.raises(FileNotFoundError, match="03_answer_long_context"):
        judge.plan_judging(ds, questions, dataset="locomo", systems=["long_context_gpt-oss-120b"])
    other = pd.DataFrame({"question_id": ["elsewhere-1"], "conversation_id": ["x"]})
    write_answers(ds, "memory_mem0_style", pd.concat([questions.head(2), other]), lambda i, r: "x")
    with pytest.raises(ValueError, match="elsewhere-1"):
        judge.plan_judging(ds, questions, dataset="locomo")
    with pytest.raises(FileNotFoundError, match="00_prepare_data"):
        load_questions(run_paths.dataset("longmemeval"))


def test_rerun_reuses_votes_and_rejudges_changed_answers(run_paths):
    ds, questions = small_locomo(run_paths, n=3)
    write_answers(ds, "memory_mem0_style", questions, lambda i, r: r.answer)
    client = offline_client(run_paths)
    plan = judge.plan_judging(ds, questions, dataset="locomo")
    first = judge.run_judging(client, plan, ds.judgments, prompt_names=["judge", "judge_strict"])
    assert first.sent == 3 * 3 * 2
    written = ds.judgments.read_bytes()
    again = judge.run_judging(client, plan, ds.judgments, prompt_names=["judge", "judge_strict"])
    assert (again.sent, again.reused, again.dropped) == (0, 18, 0)
    assert ds.judgments.read_bytes() == written  # nothing asked: the file is left as it was
    assert len(again.judgments) == 18
    assert again.judgments.loc[again.judgments["prompt_name"] == "judge", "primary"].all()
    ds.answers_file("memory_mem0_style").unlink()
    write_answers(
        ds,
        "memory_mem0_style",
        questions,
        lambda i, r: "a different answer" if i == 0 else r.answer,
    )
    plan = judge.plan_judging(ds, questions, dataset="locomo")
    changed = judge.run_judging(client, plan, ds.judgments, prompt_names=["judge"])
    assert (changed.sent, changed.reused, changed.dropped) == (3, 6, 12)
    assert len(changed.judgments) == 9 and changed.judgments["primary"].all()


def test_failure_analysis_tags_with_and_without_facts(run_paths):
    ds, questions = prepared(run_paths, "locomo")
    picks = {"conv-1-q7": "temporal", "conv-1-q6": "update", "conv-1-q0": "coreference"}
    facts = pd.DataFrame(
        [
            {
                "fact_id": "conv-1:f0",
                "text": "Visited her sister in Porto",
                "status": "active",
                "session_datetime": "2023-03-27T10:00:00",
            },
            {
                "fact_id": "conv-1:f1",
                "text": "Goes to yoga twice a week",
                "status": "active",
                "session_datetime": "2023-02-01T10:00:00",
            },
            {
                "fact_id": "conv-1:f2",
                "text": "He has a dog, a beagle",
                "status": "active",
                "session_datetime": "2023-02-01T10:00:00",
            },
        ]
    )
    retrieved = {"conv-1-q7": ["conv-1:f0"], "conv-1-q6": ["conv-1:f1"], "conv-1-q0": ["conv-1:f2"]}
    with AnswerWriter(ds, "memory_mem0_style") as writer:
        for row in questions.itertuples():
            answer = {
                "conv-1-q7": "I don't know when",
                "conv-1-q6": "twice a week",
                "conv-1-q0": "I don't know",
            }.get(row.question_id, row.answer)
            writer.write(
                dict(
                    BASE,
                    question_id=row.question_id,
                    conversation_id=row.conversation_id,
                    answer=answer,
                    retrieved_item_ids=retrieved.get(row.question_id, []),
                )
            )
    write_answers(ds, "long_context_gpt-5-mini", questions, lambda i, r: r.answer)
    plan = judge.plan_judging(ds, questions, dataset="locomo")
    votes = judge.run_judging(offline_client(run_paths), plan, ds.judgments).judgments
    table, counts = judge.failure_analysis(votes, plan.answers, questions, facts)
    tags = table.set_index("question_id")["tags"]
    assert set(tags.index) == set(picks)
    assert "temporal marker lost" in tags["conv-1-q7"]
    assert "update not propagated" in tags["conv-1-q6"]
    assert "coreference" in tags["conv-1-q0"]
    assert "He has a dog" in table.set_index("question_id").loc["conv-1-q0", "retrieved_facts"]
    counts = counts.set_index("tag")["questions"]
    assert counts["temporal marker lost"] >= 1 and counts["coreference"] >= 1
    bare, bare_counts = judge.failure_analysis(votes, plan.answers, questions, None)
    assert len(bare) == 3 and (bare["tags"] == "").all()
    assert bare["retrieved_facts"].str.contains("not available").all()
    assert bare_counts["questions"].sum() == 0


def test_one_answer_walked_through_three_votes_is_kept_by_the_batch(run_paths):
    ds, questions = small_locomo(run_paths, n=3)
    write_answers(
        ds, "memory_mem0_style", questions, lambda i, r: r.answer if i else "something else"
    )
    client = offline_client(run_paths)
    plan = judge.plan_judging(ds, questions, dataset="locomo")
    item = plan.items["memory_mem0_style"][0]
    votes = judge.judge_one(client, item, ds.judgments, n_votes=3)
    assert votes["vote"].tolist() == [0, 1, 2]
    assert set(votes["label"]) == {WRONG} and set(votes["judge_model"]) == {LEXICAL}
    outcome = judge.question_outcomes(votes).iloc[0]
    assert (outcome.wrong_votes, outcome.label) == (3, WRONG)
    again = judge.judge_one(client, item, ds.judgments, n_votes=3)  # read back, not asked
    assert again["request_hash"].tolist() == votes["request_hash"].tolist()
    assert len(read_jsonl(ds.judgments)) == 3
    batch = judge.run_judging(client, plan, ds.judgments)
    assert (batch.sent, batch.reused, batch.dropped) == (3 * 3 - 3, 3, 0)
    assert len(batch.judgments) == 9


def test_judgment_records_have_the_schema_fields_in_order():
    from memcost.answers import JUDGMENT_FIELDS, judgment_record

    record = judgment_record(question_id="q", vote=1, label=CORRECT)
    assert tuple(record) == JUDGMENT_FIELDS and record["system"] is None
    with pytest.raises(ValueError, match="not judgments.jsonl fields"):
        judgment_record(question_id="q", verdict="CORRECT")
