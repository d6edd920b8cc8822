"""Requests as values: cache keys, family rules for request bodies, JSON parsing, batching."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from memcost.calls import canonical_json, sha256_hex
from memcost.llm import ChatRequest, EmbeddingRequest, parse_json, parse_json_object
from memcost.llm.offline import plan_batches
from memcost.llm.providers import chat_body, resolve_endpoint
from memcost.llm.requests import KEY_SCHEME, json_text, reask_request

MSGS = (("system", "You judge answers."), ("user", "Is 'Paris' correct for 'capital of France'?"))


def judge(**changes) -> ChatRequest:
    base = dict(
        model="gpt-5-mini-2025-08-07",
        messages=MSGS,
        stage="judge",
        prompt_version="judge@v1",
        reasoning_effort="high",
    )
    base.update(changes)
    return ChatRequest(**base)


def test_key_covers_what_changes_the_answer_and_nothing_else():
    p = "openai|https://api.openai.com/v1"
    base = judge().key(p)
    assert base == judge().key(p)
    assert len(base) == 64
    # payload and tags ride along but are not part of the key
    assert judge(payload={"x": 1}, tags={"question_id": "q1"}).key(p) == base
    # everything that can change the answer is
    for changed in (
        judge(sample_index=1),
        judge(model="gpt-5-nano-2025-08-07"),
        judge(reasoning_effort="low"),
        judge(max_output_tokens=100),
        judge(json_mode=True),
        judge(messages=MSGS[:1] + (("user", "Is 'Lyon' correct?"),)),
    ):
        assert changed.key(p) != base
    assert judge().key("custom|http://localhost:8000/v1") != base
    # stage and prompt_version label the call; the messages already carry the prompt
    assert judge(stage="read").key(p) == base


def test_messages_as_dicts_are_the_same_request():
    as_dicts = judge(messages=[{"role": r, "content": c} for r, c in MSGS])
    assert as_dicts == judge() and as_dicts.messages == MSGS


def test_three_judge_votes_are_three_requests():
    keys = {judge(sample_index=i).key("offline") for i in range(3)}
    assert len(keys) == 3


def test_key_is_the_same_in_another_process():
    code = (
        "from memcost.llm import ChatRequest\n"
        f"r = ChatRequest(model='gpt-5-mini-2025-08-07', messages={MSGS!r}, stage='judge', "
        "prompt_version='judge@v1', reasoning_effort='high')\n"
        "print(r.key('openai|https://api.openai.com/v1'))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONHASHSEED": "123", "PATH": ""},
    )
    assert out.stdout.strip() == judge().key("openai|https://api.openai.com/v1")


def test_invalid_requests_are_refused_early():
    with pytest.raises(ValueError, match="rejects temperature"):
        judge(temperature=0.0)
    with pytest.raises(ValueError, match="unknown stage"):
        judge(stage="answer")
    with pytest.raises(ValueError, match="prompt_version"):
        judge(prompt_version="")
    with pytest.raises(ValueError, match="overwrite ledger fields"):
        judge(tags={"model": "x"})
    with pytest.raises(ValueError, match="roles"):
        judge(messages=(("robot", "hi"),))


def test_gpt5_bodies_carry_reasoning_effort_and_max_completion_tokens():
    body = chat_body(judge(max_output_tokens=500, json_mode=True))
    assert body["reasoning_effort"] == "high"
    assert body["max_completion_tokens"] == 500
    assert body["response_format"] == {"type": "json_object"}
    assert "temperature" not in body and "max_tokens" not in body
    assert body["messages"][1] == {"role": "user", "content": MSGS[1][1]}


def test_other_models_get_temperature_and_max_tokens():
    request = ChatRequest(
        "openai/gpt-oss-120b",
        MSGS,
        "long_context",
        "lc@v1",
        temperature=0.0,
        max_output_tokens=2000,
    )
    body = chat_body(request)
    assert body["temperature"] == 0.0 and body["max_tokens"] == 2000
    assert "max_completion_tokens" not in body and "reasoning_effort" not in body


def test_endpoints_hold_no_credentials_in_their_identity():
    ep = resolve_endpoint("custom", base_url="http://user:secret@localhost:8000/v1?token=abc")
    assert "secret" not in ep.identity and "abc" not in ep.identity
    assert resolve_endpoint("openrouter").base_url == "https://openrouter.ai/api/v1"
    assert resolve_endpoint("openrouter").key_env == "OPENROUTER_API_KEY"
    assert (
        resolve_endpoint("custom", base_url="http://h:1/v1", api_key_env="MY_KEY").key_env
        == "MY_KEY"
    )
    with pytest.raises(ValueError, match="base_url"):
        resolve_endpoint("custom")
    # a key pasted where its variable's name goes is refused, and never repeated
    with pytest.raises(ValueError, match="name of an environment variable") as info:
        resolve_endpoint("custom", base_url="http://h:1/v1", api_key_env="sk-proj-abc123")
    assert "sk-proj-abc123" not in str(info.value)


def test_parse_json_accepts_fences_and_prose_and_refuses_the_rest():
    assert parse_json('{"a": 1}') == {"a": 1}
    assert parse_json('```json\n{"a": [1, 2]}\n```') == {"a": [1, 2]}
    assert parse_json('Sure! Here it is: {"label": "CORRECT"} Hope that helps.') == {
        "label": "CORRECT"
    }
    assert parse_json("[1, 2]") == [1, 2]
    with pytest.raises(ValueError) as caught:
        parse_json("CORRECT")
    assert str(caught.value) == "no JSON value in the reply (starts 'CORRECT')"
    assert not getattr(caught.value, "__notes__", None)
    with pytest.raises(ValueError, match="object"):
        parse_json_object("[1]")
    # a reply cut off at its output limit: the message is unchanged (a re-ask shows it to the
    # model), and a note says where the parser stopped, at the last character of 65
    with pytest.raises(ValueError) as caught:
        parse_json('{"decisions": [{"fact": 1, "event": "ADD", "text": "She adopted a')
    assert str(caught.value).startswith("no JSON value in the reply (starts '{")
    assert caught.value.__notes__ == [
        "the JSON does not parse: Unterminated string starting at: line 1 column 52 (char 51) "
        "of 65 characters"
    ]


def test_reasks_are_distinct_even_when_the_model_repeats_itself():
    original = judge()
    first = reask_request(original, "CORRECT", "no JSON", 1)
    second = reask_request(first, "CORRECT", "no JSON", 2)
    keys = {r.key("offline") for r in (original, first, second)}
    assert len(keys) == 3
    assert second.prompt_version == "judge@v1+json_reask@v1"
    assert second.tags["reask"] == 2 and second.messages[: len(MSGS)] == MSGS


def test_embedding_batches_respect_the_api_limits():
    texts = [f"fact number {i} about the user" for i in range(10)]
    batches, fitted, truncated = plan_batches(
        texts, max_inputs=4, max_tokens=1_000, max_input_tokens=100
    )
    assert [len(b) for b in batches] == [4, 4, 2]
    assert [i for b in batches for i in b] == list(range(10)) and truncated == 0
    long = "word " * 500
    batches, fitted, truncated = plan_batches(
        ["a b", long, "c d"], max_tokens=102, max_input_tokens=100
    )
    assert truncated == 1 and len(fitted[1]) < len(long)
    assert [i for b in batches for i in b] == [0, 1, 2] and len(batches) == 2
    with pytest.raises(ValueError):
        EmbeddingRequest("text-embedding-3-small", ())


def test_base_url_names_the_custom_server_when_one_model_is_routed_there(monkeypatch, tmp_path):
    """The paper's split: GPT-5 models on OpenAI, GPT-OSS-120B on your own vLLM server."""
    from memcost.llm.providers import check_credentials, resolve_endpoint

    vllm = "http://gpu-box:8000/v1"
    openai_ep = resolve_endpoint("openai", base_url=vllm, custom_routed=True)
    custom_ep = resolve_endpoint("custom", base_url=vllm, primary=False, custom_routed=True)
    assert openai_ep.base_url == "https://api.openai.com/v1"
    assert custom_ep.base_url == vllm and custom_ep.key_env == ""
    # with no model on a custom server, base_url still redirects the primary backend (a proxy)
    assert resolve_endpoint("openai", base_url="http://proxy:9/v1").base_url == "http://proxy:9/v1"
    # only the OpenAI key is needed: the custom server takes none
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-routing-000000000000000000")
    found = check_credentials(
        "openai",
        base_url=vllm,
        model_backends={"openai/gpt-oss-120b": "custom"},
        env_file=tmp_path / "none.env",
    )
    assert found == {"openai": "OPENAI_API_KEY"}


def test_client_routes_each_model_to_its_endpoint(run_paths, monkeypatch):
    from memcost.llm import make_client

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-routing-000000000000000000")
    client = make_client(
        run_paths,
        backend="openai",
        base_url="http://gpu-box:8000/v1",
        model_backends={"openai/gpt-oss-120b": "custom"},
        progress=False,
    )
    assert client.endpoint_for("gpt-5-mini-2025-08-07").base_url == "https://api.openai.com/v1"
    assert client.endpoint_for("openai/gpt-oss-120b").base_url == "http://gpu-box:8000/v1"


def test_a_request_written_as_a_record_reads_back_with_its_key_and_tags():
    from memcost.llm.requests import request_from_record, request_record

    chat = ChatRequest(
        model="gpt-5-mini-2025-08-07",
        messages=(("system", "s"), ("user", "u")),
        stage="judge",
        prompt_version="judge@v1",
        sample_index=2,
        reasoning_effort="low",
        max_output_tokens=50,
        json_mode=True,
        tags={"question_id": "q1", "dataset": "locomo"},
    )
    embed = EmbeddingRequest(
        model="text-embedding-3-small",
        inputs=("a", "b"),
        dimensions=256,
        tags={"conversation_id": "c1"},
    )
    for request in (chat, embed):
        back = request_from_record(json.loads(json.dumps(request_record(request))))
        assert back == request and back.key("p") == request.key("p")
        assert back.tags == request.tags and type(back) is type(request)


@pytest.mark.parametrize("length", [0, 5, 8_191, 8_192, 8_193, 40_000])
def test_long_texts_escape_in_chunks_exactly_as_json_does(length):
    # every character JSON escapes, a non-BMP one and a lone surrogate, across chunk borders
    alphabet = 'ab "\\\n\t\x01\x1f\u2028é😀\ud800/'
    text = "".join(alphabet[(i * 7) % len(alphabet)] for i in range(length))
    assert json_text(text) == canonical_json(text)


def test_request_key_is_the_hash_of_its_canonical_json():
    """The key of a stored answer must never change: a store made before (or a published run
    reused) would no longer serve its answers."""
    history = "\n".join(f'Caroline said "{i}" \\ {i}\t😀' for i in range(3_000))
    request = ChatRequest(
        model="gpt-5-mini-2025-08-07",
        messages=(("system", "Answer."), ("user", history + "\nQuestion: when?")),
        stage="long_context",
        prompt_version="long_context@1",
        reasoning_effort="low",
        sample_index=1,
    )
    material = canonical_json(
        {
            "model": request.model,
            "messages": [list(m) for m in request.messages],
            "params": {"reasoning_effort": "low"},
            "sample_index": 1,
        }
    )
    assert request.key("openai") == sha256_hex(f"{KEY_SCHEME}\nchat\nopenai\n{material}")
