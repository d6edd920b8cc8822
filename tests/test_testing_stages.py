"""The stage-aware responder: every reply parses with the stage's own parser, malformed replies
are seeded and repaired by the re-ask, and the embeddings see word overlap."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from fake_api import stages

from memcost import answers, data, judge, longctx, prompts
from memcost.answers import AnswerWriter
from memcost.judge.votes import parse_verdict
from memcost.llm import ChatRequest, parse_json
from memcost.llm.requests import reask_request
from memcost.longctx.history import full_context, question_block
from memcost.memory.facts import memory_users
from memcost.memory.segments import extraction_request, parse_extraction, plan_users
from memcost.memory.update import parse_update, render_memories_for_update
from memcost.paths import RunPaths


def body(request: ChatRequest | tuple) -> dict:
    """The JSON body the client would send (``chat_body`` without the generation settings)."""
    messages = request.messages if isinstance(request, ChatRequest) else request
    return {
        "model": "gpt-5-mini-2025-08-07",
        "messages": [{"role": r, "content": c} for r, c in messages],
    }


@pytest.fixture(scope="module")
def locomo(tmp_path_factory):
    """The bundled LoCoMo sample as notebook 00 prepares it."""
    ds = RunPaths(tmp_path_factory.mktemp("stages") / "run").ensure().dataset("locomo").ensure()
    data.write_prepared(ds, data.prepare(data.load(data.resolve_source("locomo"))))
    return ds, pd.read_parquet(ds.conversations), pd.read_parquet(ds.questions)


def test_extraction_facts_come_from_the_people_and_cite_their_messages(locomo):
    _, conversations, questions = locomo
    users = memory_users(conversations, questions)
    plans = plan_users(conversations, users)
    replies = 0
    for plan in plans.values():
        for segment in plan.segments:
            request = extraction_request(segment, dataset="locomo")
            assert stages.stage_of(body(request)) == stages.EXTRACT
            reply = json.dumps(stages.extract_reply(request.messages[-1][1]))
            facts = parse_extraction(reply)
            numbers = {m.number: m.speaker for m in segment.person_messages}
            for fact in facts:
                assert fact["turns"] and all(numbers[t] == fact["speaker"] for t in fact["turns"])
                assert fact["text"].startswith(f"{fact['speaker']} said: ")
            replies += bool(facts)
    assert replies > 10


def test_update_decisions_name_only_the_listed_memories():
    stored = [
        ("m1", {"text": "Ana said: I go to yoga twice a week.", "session_datetime": None}),
        ("m2", {"text": "Ana said: My cat is called Miso.", "session_datetime": None}),
    ]
    facts = [
        "Ana said: I go to yoga three times a week now.",
        "Ana said: My cat is called Miso.",
        "Ana said: I bought a red bike.",
        "Ana said: I stopped going to yoga twice a week.",
    ]
    messages = prompts.MEMORY_UPDATE.messages(
        memories=render_memories_for_update(stored),
        when="latest conversation",
        facts="\n".join(f"{i + 1}. {f}" for i, f in enumerate(facts)),
    )
    assert stages.stage_of(body(messages)) == stages.UPDATE
    decisions = parse_update(json.dumps(stages.update_reply(messages[-1][1])))
    assert [(d["fact"], d["event"], d["memory_id"]) for d in decisions] == [
        (1, "UPDATE", "m1"),
        (2, "NOOP", "m2"),
        (3, "ADD", None),
        (4, "DELETE", "m1"),
    ]
    assert decisions[0]["text"].startswith(facts[0])


def test_readers_answer_from_what_they_are_shown(locomo):
    _, conversations, questions = locomo
    question = questions.iloc[0]
    memories = "- Jonas said: I adopted a beagle called Pretzel.\n- Maya said: I like tea."
    messages = prompts.MEMORY_READ.messages(
        memories=memories, date_line="", question="What breed is Jonas's dog?"
    )
    assert stages.stage_of(body(messages)) == stages.READ
    assert stages.read_reply(messages[-1][1]) == "Jonas said: I adopted a beagle called Pretzel."
    mc = answers.multiple_choice("q-1", ["a beagle called Pretzel", "a cat", "no pet"])
    messages = prompts.MEMORY_READ.messages(
        memories=memories,
        date_line="",
        question=f"Which pet?\n\nOptions:\n{mc.render()}\n{answers.MC_ANSWER_INSTRUCTION}",
    )
    assert answers.parse_choice(stages.read_reply(messages[-1][1]), mc) == mc.correct_letter
    # long context: a sentence of the history (without its speaker), or an option
    histories = longctx.build_histories(conversations)
    shown = full_context(histories[str(question["conversation_id"])]).text
    block = question_block(str(question["question"]))
    messages = prompts.LONG_CONTEXT_ANSWER.messages(history=shown, question_block=block)
    assert stages.stage_of(body(messages)) == stages.LONG_CONTEXT
    answer = stages.long_context_reply(messages[-1][1])
    assert answer and answer in shown and "Question:" not in answer
    block = question_block("Which pet?", options=mc.options)
    messages = prompts.LONG_CONTEXT_ANSWER.messages(
        history="Jonas: I adopted Pretzel.\n", question_block=block
    )
    assert answers.parse_choice(stages.long_context_reply(messages[-1][1]), mc) is not None


def test_judge_verdicts_parse_and_follow_the_reference(locomo):
    ds, _, questions = locomo
    few = questions.loc[questions["category"] == "single_hop"].head(4)
    base = {
        "model": "m",
        "backend": "custom",
        "prompt_version": "p",
        "prompt_tokens": 1,
        "cached_prompt_tokens": 0,
        "completion_tokens": 1,
        "reasoning_tokens": 0,
        "latency_s": 0.1,
        "error": None,
    }
    with AnswerWriter(ds, "memory_mem0_style") as writer:
        for i, row in enumerate(few.itertuples()):
            writer.write(
                dict(
                    base,
                    question_id=row.question_id,
                    conversation_id=row.conversation_id,
                    answer=f"It was {row.answer}." if i % 2 == 0 else "No idea.",
                )
            )
    plan = judge.plan_judging(ds, few, dataset="locomo")
    requests = judge.judge_requests(plan.items["memory_mem0_style"], n_votes=1)
    responder = stages.StageResponder(malformed_every=0)
    labels = []
    for request in requests:
        assert stages.stage_of(body(request)) == stages.JUDGE
        labels.append(parse_verdict(responder(body(request)))["label"])
    assert labels == ["CORRECT", "WRONG", "CORRECT", "WRONG"]


def test_malformed_replies_are_seeded_and_the_reask_repairs_them(locomo):
    _, conversations, questions = locomo
    plans = plan_users(conversations, memory_users(conversations, questions))
    requests = [extraction_request(s, dataset="locomo") for p in plans.values() for s in p.segments]
    responder = stages.StageResponder(seed=0, malformed_every=3)
    broken = [r for r in requests if responder.breaks(body(r))]
    assert 0 < len(broken) < len(requests)
    assert broken == [r for r in requests if stages.StageResponder(0, 3).breaks(body(r))]
    assert broken != [r for r in requests if stages.StageResponder(1, 3).breaks(body(r))]
    for request in broken:
        reply = responder(body(request))
        with pytest.raises(ValueError):
            parse_json(reply)
        again = reask_request(request, reply, "unparseable reply", 1)
        assert stages.is_reask(body(again)) and not responder.breaks(body(again))
        parse_extraction(responder(body(again)))
    assert not stages.StageResponder(malformed_every=0).breaks(body(broken[0]))


def test_lexical_embeddings_are_unit_vectors_close_for_shared_words():
    a = stages.lexical_embedding("Jonas adopted a beagle called Pretzel", 1536)
    b = stages.lexical_embedding("What breed is the beagle Jonas adopted?", 1536)
    c = stages.lexical_embedding("Maya paints murals at the library", 1536)
    for v in (a, b, c, stages.lexical_embedding("!!!", 64)):
        assert v.dtype == np.float32 and np.linalg.norm(v) == pytest.approx(1.0, abs=4e-3)
    assert float(a @ b) > float(a @ c)
