"""Answering from memory: isolation between users, evidence recall, the offline reader, empty
memories, and the reader's request through the real client."""

from __future__ import annotations

import pandas as pd
import pytest
from fake_api.openai_server import CHAT_PATH, FakeOpenAIServer
from llm_helpers import TEST_KEY, api_client
from test_memory import answer_from_memory, api_responder, build, make_turns, yoga_conversation

from memcost import answers, offline
from memcost.answers import REQUIRED_FIELDS
from memcost.calls import read_calls
from memcost.io import read_jsonl
from memcost.llm import make_client
from memcost.memory.faiss_store import FaissStore, index_dir
from memcost.memory.reader import (
    TurnEvidence,
    covered_positions,
    evidence_coverage,
    evidence_units,
    reader_request,
)
from memcost.memory.search import MemoryStore, Retrieved, retrieve


def make_questions(rows: list[tuple]) -> pd.DataFrame:
    """``rows`` = [(question_id, conversation_id, question, gold, evidence, question_date)]."""
    return pd.DataFrame(
        [
            {
                "question_id": q,
                "conversation_id": c,
                "question": text,
                "answer": gold,
                "category": "single_hop",
                "evidence": evidence,
                "is_abstention": False,
                "question_date": when,
            }
            for q, c, text, gold, evidence, when in rows
        ]
    )


def answer(run, turns, questions, *, users=None, client=None, **options):
    ds, _, _ = build(run, turns, users=users, client=client)
    client = client or make_client(run, progress=False)
    report = answer_from_memory(client, ds, questions, turns, dataset="locomo", **options)
    return ds, report, answers.load_answers(ds, "memory_mem0_style").set_index("question_id")


def test_evidence_units_and_coverage_on_a_hand_made_case():
    turns = make_turns(
        "u",
        [
            (
                "2023-01-01T10:00:00",
                [
                    ("Ana", "user", "a", {"dia_id": "D1:1"}),
                    ("Ana", "user", "b", {"dia_id": "D1:2"}),
                ],
            ),
            (
                "2023-01-02T10:00:00",
                [
                    ("user", "user", "c", {"session_id": "ans_1"}),
                    ("user", "user", "d", {"session_id": "ans_1", "has_answer": True}),
                ],
            ),
            (
                "2023-01-03T10:00:00",
                [
                    ("user", "user", "e", {"session_id": "ans_2"}),
                    ("user", "user", "f", {"session_id": "ans_2"}),
                ],
            ),
        ],
    )
    units = evidence_units(["D1:2", "D7:7", "ans_1", "ans_2"], turns)
    assert units == [frozenset({1}), frozenset({3}), frozenset({4, 5})]  # D7:7 points nowhere
    facts = pd.DataFrame({"source_positions": [[0], [2], [5]]})
    # D1:2 not covered (only D1:1), ans_1 not covered by its unflagged turn, ans_2 covered.
    assert evidence_coverage(units, facts) == pytest.approx(1 / 3)
    facts = pd.DataFrame({"source_positions": [[1, 3], [4]]})
    assert evidence_coverage(units, facts) == 1.0
    assert evidence_coverage([], facts) is None
    # a user's look-ups, made once, give every question the same answer
    lookup = TurnEvidence(turns)
    assert lookup.units(["D1:2", "D7:7", "ans_1", "ans_2"]) == units
    assert lookup.units(["ans_2", "D1:1"]) == [frozenset({4, 5}), frozenset({0})]
    assert evidence_coverage(units[:2], covered_positions(facts)) == 1.0


def test_two_users_with_identical_facts_never_retrieve_each_other(run_paths):
    turns = pd.concat([yoga_conversation("pair-1"), yoga_conversation("pair-2")])
    questions = make_questions(
        [
            (
                f"{u}-q",
                u,
                "How many times a week does Ana go to yoga now?",
                "Three times a week",
                ["D2:1"],
                None,
            )
            for u in ("pair-1", "pair-2")
        ]
    )
    ds, report, got = answer(run_paths, turns, questions)
    assert report.answered == 2
    texts = {}
    for user in ("pair-1", "pair-2"):
        ids = got.loc[f"{user}-q", "retrieved_item_ids"]
        assert len(ids) == 3 and all(f.startswith(f"{user}:") for f in ids)
        facts = pd.read_parquet(ds.memory / "facts.parquet").set_index("fact_id")
        texts[user] = sorted(facts.loc[ids, "text"])
    assert texts["pair-1"] == texts["pair-2"]  # the same facts, each user's own copy
    store = MemoryStore(ds, FaissStore(0, folder=index_dir(ds)))
    vector = store.vectors("pair-2")[0]  # a pair-2 fact, searched in pair-1's index
    found = retrieve(store, "pair-1", vector, top_k=20)
    assert found.fact_ids and all(f.startswith("pair-1:") for f in found.fact_ids)
    assert found.scores[0] == pytest.approx(1.0, abs=4e-3)  # its identical twin, not itself


def test_offline_answers_and_evidence_recall(run_paths):
    turns = yoga_conversation()
    questions = make_questions(
        [
            (
                "q-now",
                "pair-1",
                "How many times a week does Ana go to yoga now?",
                "Three times a week",
                ["D2:1"],
                None,
            ),
            (
                "q-start",
                "pair-1",
                "When did Ana start going to yoga twice a week?",
                "Before 1 March 2023",
                ["D1:2"],
                None,
            ),
            ("q-none", "pair-1", "What colour is the submarine?", "Not mentioned", [], None),
        ]
    )
    _, _, got = answer(run_paths, turns, questions, top_k=2)
    now, start, none = (got.loc[q] for q in ("q-now", "q-start", "q-none"))
    assert now["answer"] == (
        "On 11 April 2023, Ana said: Quick news: I now go to yoga three "
        "times a week, I added a Saturday class."
    )
    assert now["evidence_recall"] == 1.0 and now["evidence_in_memory"] == 1.0
    # The first yoga fact was superseded by the update: the memory no longer holds it.
    assert start["evidence_in_memory"] == 0.0 and start["evidence_recall"] == 0.0
    assert none["answer"] == offline.NO_INFORMATION and pd.isna(none["evidence_recall"])
    assert all(len(ids) == 2 for ids in got["retrieved_item_ids"])
    assert got["index_recall"].tolist() == [1.0, 1.0, 1.0]
    assert (got["retrieved_tokens"] > 10).all() and (got["search_latency_s"] > 0).all()


def test_an_empty_memory_answers_that_it_has_no_information(run_paths):
    questions = make_questions([("q", "ghost", "Where does Ana live?", "Porto", [], None)])
    _, report, got = answer(run_paths, yoga_conversation(), questions, users=["pair-1", "ghost"])
    row = got.loc["q"]
    assert row["answer"] == offline.NO_INFORMATION
    assert list(row["retrieved_item_ids"]) == [] and row["retrieved_tokens"] == 0
    assert report.errors == 0


def test_reader_request_through_the_client(run_paths, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", TEST_KEY)
    turns = yoga_conversation()
    questions = make_questions(
        [
            (
                "q1",
                "pair-1",
                "How often does Ana do yoga?",
                "Three times a week",
                ["D2:1"],
                "2023-05-20T09:15:00",
            ),
            ("q2", "pair-1", "Does Ben have a dog?", "Yes, a beagle", ["D1:3"], None),
        ]
    )
    with FakeOpenAIServer(api_key=TEST_KEY, responder=api_responder) as server:
        client = api_client(run_paths, server.url, tmp_path)
        ds, report, got = answer(run_paths, turns, questions, client=client)
        reads = [
            r.body
            for r in server.requests
            if r.path == CHAT_PATH and "You answer a question" in r.body["messages"][0]["content"]
        ]
        assert report.answered == 2 and got.loc["q1", "answer"] == "Three times a week."
        assert len(reads) == 2
        for body in reads:
            assert body["model"] == "gpt-5-mini-2025-08-07"
            assert body["reasoning_effort"] == "medium"
            assert "temperature" not in body and "max_tokens" not in body
        user_texts = sorted(b["messages"][1]["content"] for b in reads)
        dated = [t for t in user_texts if "Question date:" in t]
        assert len(dated) == 1 and "Question date: Saturday 20 May 2023, 09:15" in dated[0]
        assert "- [11 April 2023] Ana goes to yoga three times a week" in dated[0]

        again = answer_from_memory(client, ds, questions, turns, dataset="locomo")
        assert again.answered == 0 and again.resumed == 2

    record = read_jsonl(ds.answers_file("memory_mem0_style"))[0]
    for name in (
        *REQUIRED_FIELDS,
        "retrieved_item_ids",
        "retrieved_scores",
        "retrieved_tokens",
        "search_latency_s",
        "evidence_recall",
    ):
        assert name in record
    assert record["system"] == "memory_mem0_style" and record["backend"] == "openai"
    assert record["prompt_version"] == "memory_read@v1" and record["reasoning_tokens"] == 64
    calls = read_calls(run_paths.calls)
    queries = [c for c in calls if c["stage"] == "embed" and c["question_id"]]
    assert sorted(c["question_id"] for c in queries) == ["q1", "q2"]
    assert {c["system"] for c in queries} == {"memory_mem0_style"}
    fact_embeds = [c for c in calls if c["stage"] == "embed" and not c["question_id"]]
    assert fact_embeds and all(c["system"] == "memory_mem0_style" for c in fact_embeds)
    reads = [c for c in calls if c["stage"] == "read"]
    assert sorted(c["question_id"] for c in reads) == ["q1", "q2"]
    assert {c["system"] for c in reads} == {"memory_mem0_style"}


def test_multiple_choice_reader_lists_options_in_the_judges_order():
    from memcost import answers

    options = ["Oat milk", "Whole milk with honey and a pinch of cinnamon", "Soy milk", "Goat milk"]
    question = {
        "question_id": "pm-7",
        "conversation_id": "u1",
        "question": "Which milk to buy?",
        "options": options,
    }
    facts = pd.DataFrame(
        {
            "text": ["Ana switched to oat milk in May.", "Ana walks her dog."],
            "session_datetime": [None, None],
        }
    )
    found = Retrieved(("u1:f0", "u1:f1"), (0.9, 0.1), facts, 0.0, None)
    request = reader_request(question, found, dataset="personamem_v2", mode="multiple_choice")
    mc = answers.multiple_choice("pm-7", options)
    assert mc.render() in request.messages[-1][1]
    assert answers.MC_ANSWER_INSTRUCTION in request.messages[-1][1]
    answer = offline.offline_reader(request)
    assert mc.option(answers.parse_choice(answer, mc)) == "Oat milk"
    # open-ended mode keeps the question bare and answers from the facts
    open_request = reader_request(question, found, dataset="personamem_v2")
    assert "Options:" not in open_request.messages[-1][1]
    assert offline.offline_reader(open_request) == "Ana switched to oat milk in May."
    with pytest.raises(ValueError, match="mode must be one of"):
        reader_request(question, found, dataset="personamem_v2", mode="mc")


def test_the_offline_reader_answers_with_one_line_of_a_chunk_not_the_chunk():
    """A memory that shows raw chunks (RAG) or summaries shows many lines in one item: the
    offline reader quotes the line that answers, as it quotes a fact, instead of the whole
    chunk (which the lexical judge would pass for its length alone)."""
    chunk = "\n".join(
        [
            "[1 March 2023] Maya: Hey Jonas! It's been ages.",
            "[1 March 2023] Jonas: I finally adopted a dog in January, a beagle called Pretzel.",
            "[1 March 2023] Maya: Pretzel is such a good name.",
        ]
    )
    items = pd.DataFrame(
        {"text": [chunk, "Maya runs on Sundays."], "session_datetime": [None, None]}
    )
    found = Retrieved(("u1:c0", "u1:c1"), (0.9, 0.1), items, 0.0, None)
    question = {
        "question_id": "q1",
        "conversation_id": "u1",
        "question": "Which breed is the dog Jonas adopted?",
    }
    answer = offline.offline_reader(reader_request(question, found, dataset="locomo"))
    assert answer == (
        "[1 March 2023] Jonas: I finally adopted a dog in January, a beagle called Pretzel."
    )
