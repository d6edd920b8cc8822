"""The client against a real local HTTP server, through the real ``openai`` SDK.

Every assertion about what was sent is checked at the server (what it received, when), and
every assertion about what was recorded is checked in the files the client wrote.
"""

from __future__ import annotations

import json
import os
import threading
import time

import numpy as np
import pytest
from fake_api.openai_server import (
    CHAT_PATH,
    EMBEDDINGS_PATH,
    Action,
    FakeOpenAIServer,
    default_responder,
)
from llm_helpers import TEST_KEY, api_client, question

from memcost import costs
from memcost.calls import BASE_FIELDS, STANDARD_TAGS, CallStore, read_calls, record_cost
from memcost.llm import (
    BudgetExceeded,
    CacheMiss,
    ChatRequest,
    FatalAPIError,
    MissingCredentials,
    make_client,
    parse_json_object,
)
from memcost.llm.requests import QuotaExhausted
from memcost.paths import RunPaths


@pytest.fixture(autouse=True)
def key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", TEST_KEY)
    monkeypatch.delenv("OPENROUTER_API_KEY", raising=False)


def test_round_trip_records_usage_with_cached_and_reasoning_tokens(run_paths, server, tmp_path):
    client = api_client(run_paths, server.url, tmp_path)
    # a long shared prefix, so the server's prompt cache reports cached tokens the second time
    history = " ".join(f"turn{i} said something about topic {i % 17}." for i in range(400))
    first = ChatRequest(
        "gpt-5-mini-2025-08-07",
        (("system", history), ("user", "Q1?")),
        "long_context",
        "lc@v1",
        reasoning_effort="low",
        tags={"question_id": "a"},
    )
    second = first.replace(
        messages=(("system", history), ("user", "Q2?")), tags={"question_id": "b"}
    )
    r1 = client.chat(first)
    r2 = client.chat(second)
    assert r1.ok and r1.text.startswith("answer-") and r1.served_model == "gpt-5-mini-2025-08-07"
    assert r1.usage.reasoning_tokens == 16 and r1.usage.completion_tokens > 16
    assert r1.usage.cached_prompt_tokens == 0
    assert r2.usage.cached_prompt_tokens >= 1024 and r2.usage.cached_prompt_tokens % 128 == 0
    records = read_calls(run_paths.calls)
    assert len(records) == 2
    rec = records[1]
    assert list(rec)[: len(BASE_FIELDS)] == list(BASE_FIELDS)
    assert all(t in rec for t in STANDARD_TAGS)
    assert rec["cached_prompt_tokens"] == r2.usage.cached_prompt_tokens
    assert rec["reasoning_tokens"] == 16 and rec["attempts"] == 1 and rec["cached"] is False
    assert rec["backend"] == "openai" and rec["provider"] == f"127.0.0.1:{server.port}"
    assert (
        rec["question_id"] == "b"
        and rec["stage"] == "long_context"
        and rec["prompt_version"] == "lc@v1"
    )
    assert all(r.authorized for r in server.requests)
    frame = costs.price_calls(costs.load_ledger([run_paths]))
    assert len(frame) == 2 and (frame["cost_usd"] > 0).all()


def test_request_bodies_follow_the_model_family(run_paths, server, tmp_path):
    client = api_client(run_paths, server.url, tmp_path)
    gpt5 = ChatRequest(
        "gpt-5-mini-2025-08-07",
        (("user", "hi"),),
        "long_context",
        "lc@v1",
        reasoning_effort="low",
        max_output_tokens=4000,
    )
    oss = ChatRequest(
        "openai/gpt-oss-120b",
        (("user", "hi"),),
        "long_context",
        "lc@v1",
        temperature=0.0,
        max_output_tokens=2000,
    )
    assert client.chat(gpt5).ok and client.chat(oss).ok
    bodies = [r.body for r in server.requests]
    assert bodies[0]["reasoning_effort"] == "low" and bodies[0]["max_completion_tokens"] == 4000
    assert "temperature" not in bodies[0] and "max_tokens" not in bodies[0]
    assert bodies[1]["temperature"] == 0 and bodies[1]["max_tokens"] == 2000
    assert "max_completion_tokens" not in bodies[1] and "reasoning_effort" not in bodies[1]


def test_transient_failures_are_retried_and_every_attempt_counted(run_paths, server, tmp_path):
    client = api_client(run_paths, server.url, tmp_path, request_timeout_s=0.5, max_retries=6)
    server.script(
        Action(drop=True),  # no reply: the SDK's backoff (0.5 s, then 1 s)
        Action(delay_s=1.0),  # past the timeout
        Action(status=500, retry_after_ms=1),
        Action(status=429, retry_after_ms=1),
        Action(status=409, retry_after_ms=1),
        Action(status=503, retry_after_ms=1),
    )
    result = client.chat(question(1))
    assert result.ok and result.attempts == 7
    assert server.count() == 7  # the SDK's retries, every attempt counted through its hooks
    (record,) = read_calls(run_paths.calls)
    assert record["attempts"] == 7 and record["error"] is None
    assert client.stats.retries == 6 and client.stats.attempts == 7
    # a body that does not parse is the call's failure: recorded, and asked again by a rerun
    server.script(Action(malformed=True))
    broken = client.chat(question(2))
    assert "malformed response" in broken.error and broken.attempts == 1
    assert client.chat(question(2)).ok


def test_exhausted_retries_record_the_error_and_the_stage_carries_on(run_paths, server, tmp_path):
    client = api_client(run_paths, server.url, tmp_path, max_retries=1)
    failing = Action(status=500, retry_after_ms=1)
    server.on(lambda path, body: "item 1?" in json.dumps(body), failing, times=None)
    results = client.chat_many([question(i) for i in range(3)])
    assert [r.error is None for r in results] == [True, False, True]
    assert "HTTP 500" in results[1].error and "gave up after 2 attempts" in results[1].error
    assert results[1].text == ""
    errors = [r for r in read_calls(run_paths.calls) if r["error"]]
    assert len(errors) == 1 and errors[0]["attempts"] == 2 and errors[0]["question_id"] == "q1"
    assert client.stats.errors == 1
    # a rerun tries the failed call again (and only it: the others come from the cache)
    server.clear()
    assert all(r.ok for r in client.chat_many([question(i) for i in range(3)]))
    assert server.count() == 1


def test_retry_after_is_honoured(run_paths, server, tmp_path):
    client = api_client(run_paths, server.url, tmp_path)
    server.script(Action(status=429, retry_after="1"))
    assert client.chat(question(1)).attempts == 2
    first, second = server.requests
    assert second.arrived - first.finished >= 0.95  # backoff alone would be ~0.01 s
    server.clear()
    server.script(Action(status=429, retry_after_ms=300))
    client.chat(question(2))
    first, second = server.requests
    assert 0.28 <= second.arrived - first.finished < 0.9


def test_401_stops_at_once_and_says_what_to_do(run_paths, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-wrong-key-000")
    with FakeOpenAIServer(api_key=TEST_KEY) as server:
        client = api_client(run_paths, server.url, tmp_path, max_concurrency=4)
        t0 = time.perf_counter()
        with pytest.raises(FatalAPIError) as info:
            client.chat_many([question(i) for i in range(50)])
        assert time.perf_counter() - t0 < 2.0
        assert "set OPENAI_API_KEY (or use the offline backend)" in str(info.value)
        assert info.value.status == 401
        assert server.count() <= 4  # only what was already in flight
        assert "sk-test-wrong-key-000" not in str(info.value)
    records = read_calls(run_paths.calls)
    # each call was tried once and failed on the 401, or (under load, taken from the queue as
    # the stop came) was recorded failed without being sent; none was retried
    sent = [r for r in records if r["attempts"] == 1 and "HTTP 401" in r["error"]]
    unsent = [
        r for r in records if r["attempts"] == 0 and "not sent: the stage stopped" in r["error"]
    ]
    assert sent and len(sent) + len(unsent) == len(records)


@pytest.mark.parametrize(
    "status,needle",
    [(403, "HTTP 403"), (404, "model name")],
)
def test_other_client_errors_are_fatal_too(run_paths, server, tmp_path, status, needle):
    client = api_client(run_paths, server.url, tmp_path)
    server.script(Action(status=status))
    with pytest.raises(FatalAPIError, match=needle):
        client.chat(question(1))
    assert server.count() == 1


def test_no_quota_is_not_retried(run_paths, server, tmp_path):
    client = api_client(run_paths, server.url, tmp_path)
    server.script(Action(status=429, error_code="insufficient_quota"))
    with pytest.raises(QuotaExhausted, match="no quota left.*the run stops now"):
        client.chat(question(1))
    assert server.count() == 1


def test_missing_key_fails_before_anything_is_sent(run_paths, tmp_path, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY")
    with pytest.raises(MissingCredentials) as info:
        make_client(run_paths, backend="openai", env_file=tmp_path / "none.env")
    assert "OPENAI_API_KEY" in str(info.value) and "backend: offline" in str(info.value)
    with pytest.raises(MissingCredentials, match="MY_VLLM_KEY"):
        make_client(
            run_paths,
            backend="custom",
            base_url="http://127.0.0.1:9/v1",
            api_key_env="MY_VLLM_KEY",
            env_file=tmp_path / "none.env",
        )
    # every backend the run routes a model to is checked up front
    monkeypatch.setenv("OPENAI_API_KEY", TEST_KEY)
    with pytest.raises(MissingCredentials) as info:
        make_client(
            run_paths,
            backend="openai",
            model_backends={"openai/gpt-oss-120b": "openrouter"},
            env_file=tmp_path / "none.env",
        )
    assert "OPENROUTER_API_KEY" in str(info.value) and "openai/gpt-oss-120b" in str(info.value)
    # a local server without a key needs none
    make_client(
        run_paths,
        backend="custom",
        base_url="http://127.0.0.1:9/v1",
        env_file=tmp_path / "none.env",
    )


def test_key_from_a_dotenv_file(run_paths, server, tmp_path, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY")
    env_file = tmp_path / ".env"
    env_file.write_text(f"OPENAI_API_KEY={TEST_KEY}\n")
    client = api_client(run_paths, server.url, tmp_path, env_file=env_file)
    assert client.chat(question(1)).ok
    assert server.requests[0].authorized
    import os

    assert "OPENAI_API_KEY" not in os.environ  # read without leaking into the process


def test_cache_returns_identical_results_without_touching_the_server(run_paths, server, tmp_path):
    requests = [question(i) for i in range(10)]
    first = api_client(run_paths, server.url, tmp_path).chat_many(requests)
    assert server.count() == 10
    # the same run again: nothing sent, nothing recorded twice
    again = api_client(run_paths, server.url, tmp_path)
    replay = again.chat_many(requests)
    assert server.count() == 10
    assert [r.text for r in replay] == [r.text for r in first]
    assert [r.usage for r in replay] == [r.usage for r in first]
    assert all(r.cached for r in replay)
    assert len(read_calls(run_paths.calls)) == 10 and again.stats.replayed == 10
    # another run that reuses this one: records marked cached, with the original usage
    other = RunPaths(tmp_path / "other").ensure()
    api_client(other, server.url, tmp_path, reuse_runs=[str(run_paths.root)]).chat_many(requests)
    assert server.count() == 10
    records = read_calls(other.calls)
    assert len(records) == 10 and all(r["cached"] for r in records)
    originals = {r["request_hash"]: r for r in read_calls(run_paths.calls)}
    for r in records:
        o = originals[r["request_hash"]]
        assert (r["prompt_tokens"], r["completion_tokens"], r["reasoning_tokens"]) == (
            o["prompt_tokens"],
            o["completion_tokens"],
            o["reasoning_tokens"],
        )


def test_replay_only_raises_on_a_miss(run_paths, server, tmp_path):
    api_client(run_paths, server.url, tmp_path).chat(question(1))
    client = api_client(run_paths, server.url, tmp_path, cache_mode="replay_only")
    assert client.chat(question(1)).cached
    with pytest.raises(CacheMiss) as info:
        client.chat(question(2, stage="judge"))
    message = str(info.value)
    assert (
        "judge" in message and "gpt-5-mini-2025-08-07" in message and "What is item 2?" in message
    )
    assert server.count() == 1


def test_cache_off_always_sends(run_paths, server, tmp_path):
    client = api_client(run_paths, server.url, tmp_path, cache_mode="off")
    client.chat(question(1))
    client.chat(question(1))
    assert server.count() == 2 and len(read_calls(run_paths)) == 2  # recorded all the same


def test_three_judge_samples_are_three_requests(run_paths, server, tmp_path):
    client = api_client(run_paths, server.url, tmp_path)
    votes = [question(1, stage="judge", sample_index=k, reasoning_effort="high") for k in range(3)]
    results = client.chat_many(votes)
    assert server.count() == 3 and len({r.request_hash for r in results}) == 3
    records = read_calls(run_paths.calls)
    assert sorted(r["sample_index"] for r in records) == [0, 1, 2]


def test_a_cut_off_reply_is_reasked_as_before_and_its_failure_says_where_it_stopped(
    run_paths, server, tmp_path
):
    client = api_client(run_paths, server.url, tmp_path, max_reasks=1)
    server.on(lambda p, b: True, Action(text='{"label": "CORR'), times=None)
    [result] = client.chat_many([question(1)], parse=lambda text: parse_json_object(text)["label"])
    said = 'unparseable reply: ValueError: no JSON value in the reply (starts \'{"label": "CORR\')'
    # the re-ask shows the model the line it always showed, so recorded re-asks are found again
    reask = server.requests[-1].body["messages"][-1]["content"]
    assert reask.startswith(f"Your previous reply could not be used: {said}. Reply again")
    # the item's failure says where the parser stopped: at the end, a reply cut off
    assert result.parse_error == (
        "unparseable reply: ValueError: the JSON does not parse: Unterminated string starting "
        "at: line 1 column 11 (char 10) of 15 characters; no JSON value in the reply (starts "
        '\'{"label": "CORR\')'
    )


def test_unparseable_replies_are_reasked_then_recorded_as_parse_failures(
    run_paths, server, tmp_path
):
    client = api_client(run_paths, server.url, tmp_path, max_reasks=2)
    server.on(
        lambda p, b: "item 1?" in b["messages"][1]["content"] and len(b["messages"]) == 2,
        Action(text="CORRECT, I think"),
        times=None,
    )
    server.on(
        lambda p, b: "item 1?" in b["messages"][1]["content"],
        Action(text='{"label": "CORRECT"}'),
        times=None,
    )
    server.on(
        lambda p, b: "item 2?" in b["messages"][1]["content"], Action(text="never JSON"), times=None
    )
    server.on(
        lambda p, b: "item 3?" in b["messages"][1]["content"], Action(text='{"label": "WRONG"}')
    )
    results = client.chat_many(
        [question(1), question(2), question(3)], parse=lambda text: parse_json_object(text)["label"]
    )
    assert results[2].parsed == "WRONG" and results[2].calls == 1
    assert results[0].parsed == "CORRECT" and results[0].calls == 2 and results[0].ok
    assert (
        results[1].parsed is None
        and "unparseable" in results[1].parse_error
        and results[1].calls == 3
    )
    assert results[1].record_fields()["error"] == results[1].parse_error
    assert client.stats.parse_failures == 1 and client.stats.reasks == 3
    # each re-ask was a new request (the server saw it), extending the conversation
    item2 = [
        r.body["messages"] for r in server.requests if "item 2?" in r.body["messages"][1]["content"]
    ]
    assert [len(m) for m in item2] == [2, 4, 6]
    records = read_calls(run_paths.calls)
    assert len(records) == 2 + 3 + 1
    assert {r["prompt_version"] for r in records if r.get("reask")} == {
        "test_prompt@v1+json_reask@v1"
    }
    # replayed from the cache, the same parse outcomes come back without the server
    server.clear()
    again = api_client(run_paths, server.url, tmp_path, max_reasks=2).chat_many(
        [question(1), question(2)], parse=parse_json_object
    )
    assert (
        server.count() == 0 and again[0].parsed == {"label": "CORRECT"} and again[1].parsed is None
    )


def test_concurrency_is_bounded_and_results_keep_input_order(run_paths, tmp_path):
    with FakeOpenAIServer(api_key=TEST_KEY, latency_s=0.05) as server:
        client = api_client(run_paths, server.url, tmp_path, max_concurrency=5)
        seen: list[str] = []
        results = client.chat_many(
            [question(i) for i in range(30)],
            on_result=lambda r: seen.append(r.request.tags["question_id"]),
        )
        assert [r.request.tags["question_id"] for r in results] == [f"q{i}" for i in range(30)]
        assert sorted(seen) == sorted(f"q{i}" for i in range(30))
        events = sorted(
            [(r.arrived, 1) for r in server.requests] + [(r.finished, -1) for r in server.requests]
        )
        level = peak = 0
        for _, step in events:
            level += step
            peak = max(peak, level)
        assert 3 <= peak <= 5
        # dispatch follows input order
        arrivals = [r.user_text for r in sorted(server.requests, key=lambda r: r.arrived)]
        assert (
            arrivals[:5] == [f"What is item {i}?" for i in range(5)] or len(set(arrivals[:5])) == 5
        )


def test_groups_send_the_first_request_alone_and_groups_in_parallel(run_paths, tmp_path):
    # the three first requests wait at the server for one another: they meet only if the
    # client sent them together, whatever the machine's load
    firsts_meet = threading.Barrier(3)
    met: list[bool] = []

    def meet_then_answer(body):
        if body["messages"][-1]["content"] in {f"What is item {10 * g}?" for g in range(3)}:
            try:
                firsts_meet.wait(timeout=20)
                met.append(True)
            except threading.BrokenBarrierError:
                met.append(False)
        return default_responder(body)

    with FakeOpenAIServer(api_key=TEST_KEY, responder=meet_then_answer) as server:
        client = api_client(run_paths, server.url, tmp_path, max_concurrency=8)
        groups = [
            [question(10 * g + k, tags={"conversation_id": f"c{g}"}) for k in range(4)]
            for g in range(3)
        ]
        out = client.chat_groups(groups, first_alone=True)
        assert [[r.request.tags["question_id"] for r in grp] for grp in out] == [
            [f"q{10 * g + k}" for k in range(4)] for g in range(3)
        ]
        assert met == [True, True, True]  # the groups' first requests were in flight together
        by_text = {r.user_text: r for r in server.requests}
        for g in range(3):
            first = by_text[f"What is item {10 * g}?"]
            for k in range(1, 4):
                assert by_text[f"What is item {10 * g + k}?"].arrived >= first.finished


def test_budget_guard_stops_before_exceeding(run_paths, server, tmp_path):
    overrides = {"gpt-5-mini": {"input": 1000.0, "cached_input": 100.0, "output": 1000.0}}
    long_question = "Please consider these details carefully: " + "some context words " * 20
    requests = [
        question(i, max_output_tokens=200).replace(
            messages=(("user", f"{long_question} What is item {i}?"),)
        )
        for i in range(40)
    ]
    limit = 0.8
    client = api_client(
        run_paths,
        server.url,
        tmp_path,
        max_cost_usd=limit,
        price_overrides=overrides,
        max_concurrency=4,
    )
    with pytest.raises(BudgetExceeded) as info:
        client.chat_many(requests)
    records = read_calls(run_paths.calls)
    spent = sum(record_cost(r, overrides) for r in records)
    assert 3 <= len(records) < 40
    assert spent <= limit and info.value.spent_usd == pytest.approx(spent)
    # an item still waiting for its turn when the guard stopped the stage was never sent: it
    # failed (and is asked on resume) but made no call, so it has no record
    done = [r for r in info.value.results if r is not None and r.attempts]
    unsent = [r for r in info.value.results if r is not None and not r.attempts]
    assert all(not r.ok and "not sent: the stage stopped" in r.error for r in unsent)
    assert len(done) == len(records) and server.count() == len(records)
    # the budget is the run's: a new client in the same run refuses to send more, but replays
    again = api_client(
        run_paths, server.url, tmp_path, max_cost_usd=limit, price_overrides=overrides
    )
    assert again.chat(done[0].request).cached
    with pytest.raises(BudgetExceeded):
        again.chat_many(requests)
    assert server.count() == len(records)


def test_duplicate_requests_in_flight_are_sent_once(run_paths, tmp_path):
    with FakeOpenAIServer(api_key=TEST_KEY, latency_s=0.05) as server:
        client = api_client(run_paths, server.url, tmp_path, max_concurrency=8)
        same = [question(1, tags={"system": f"s{k}"}) for k in range(6)]
        results = client.chat_many(same)
        assert server.count() == 1 and len({r.text for r in results}) == 1
        records = read_calls(run_paths.calls)
        # six logical calls (different tags), one paid, five served from the cache
        assert len(records) == 6 and sum(not r["cached"] for r in records) == 1


def test_consecutive_failures_stop_the_stage(run_paths, server, tmp_path):
    client = api_client(
        run_paths,
        server.url,
        tmp_path,
        max_concurrency=1,
        max_consecutive_failures=3,
        max_retries=1,
    )
    server.on(lambda p, b: True, Action(status=502, retry_after_ms=1), times=None)
    with pytest.raises(FatalAPIError, match="3 calls in a row"):
        client.chat_many([question(i) for i in range(20)])
    assert server.count() == 6


def test_model_backends_route_a_model_elsewhere(run_paths, tmp_path):
    with FakeOpenAIServer() as local:  # a vLLM-like server that needs no key
        client = api_client(
            run_paths,
            local.url,
            tmp_path,
            backend="custom",
            model_backends={"openai/gpt-oss-120b": "offline"},
        )
        oss = ChatRequest(
            "openai/gpt-oss-120b",
            (("user", "hi"),),
            "long_context",
            "lc@v1",
            temperature=0.0,
            payload={"answer": "offline answer"},
        )
        assert client.chat(oss, offline=lambda r: r.payload["answer"]).text == "offline answer"
        assert client.chat(question(1)).ok
        assert local.count() == 1
        backends = [r["backend"] for r in read_calls(run_paths.calls)]
        assert backends == ["offline", "custom"]


def test_embeddings_over_the_api(run_paths, server, tmp_path):
    client = api_client(run_paths, server.url, tmp_path)
    texts = [f"Caroline adopted a dog named Max in 202{i}." for i in range(5)] + ["", "   "]
    vectors = client.embed(texts, tags={"conversation_id": "c1"})
    assert vectors.shape == (7, 1536) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors[:5], axis=1), 1.0, atol=1e-5)
    assert not vectors[5:].any()
    assert server.count(EMBEDDINGS_PATH) == 1 and server.count(CHAT_PATH) == 0
    (record,) = read_calls(run_paths.calls)
    assert (
        record["stage"] == "embed"
        and record["prompt_tokens"] > 0
        and record["completion_tokens"] == 0
    )
    assert record["conversation_id"] == "c1" and record["model"] == "text-embedding-3-small"
    again = client.embed(texts, tags={"conversation_id": "c1"})
    assert np.array_equal(again, vectors) and server.count(EMBEDDINGS_PATH) == 1


def test_the_store_is_safe_across_processes_and_threads(tmp_path):
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from memcost.calls import CallStore\n"
        "c = CallStore(sys.argv[1])\n"
        "for i in range(300):\n"
        "    c.add({'request_hash': f'{sys.argv[2]}-{i}', 'error': None}, {'text': str(i)})\n"
        "    assert c.answer(f'{sys.argv[2]}-{i}')['text'] == str(i)\n"
    )
    procs = [subprocess.Popen([sys.executable, "-c", code, str(tmp_path), tag]) for tag in "abc"]
    assert [p.wait(timeout=60) for p in procs] == [0, 0, 0]
    store = CallStore(tmp_path)
    assert len(store) == 900

    def writer(tag: str) -> None:
        for i in range(100):
            store.add({"request_hash": f"{tag}-{i}", "error": None}, {"text": tag})

    threads = [threading.Thread(target=writer, args=(f"t{k}",)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(store) == 1700


def test_a_fatal_error_stops_the_retries_of_calls_in_flight(run_paths, server, tmp_path):
    client = api_client(run_paths, server.url, tmp_path, max_concurrency=2, max_retries=20)
    waiting = Action(status=500, retry_after="2")
    server.on(lambda p, b: "item 0?" in json.dumps(b), waiting, times=None)
    server.on(lambda p, b: "item 1?" in json.dumps(b), Action(status=401, delay_s=0.2), times=None)
    t0 = time.perf_counter()
    with pytest.raises(FatalAPIError, match="HTTP 401"):
        client.chat_many([question(0), question(1)])
    assert time.perf_counter() - t0 < 5.0  # its wait, then no further attempt: not 20 of them
    errors = {r["question_id"]: r["error"] for r in read_calls(run_paths.calls)}
    assert "the stage stopped" in errors["q0"] and "HTTP 401" in errors["q1"]


def test_the_local_server_rejects_what_the_api_rejects(server):
    """Later stages' tests rely on the server behaving like the API; check it with the bare SDK."""
    import openai

    sdk = openai.OpenAI(api_key=TEST_KEY, base_url=server.url, max_retries=0)
    with pytest.raises(openai.BadRequestError, match="max_completion_tokens"):
        sdk.chat.completions.create(
            model="gpt-5-mini", messages=[{"role": "user", "content": "hi"}], max_tokens=10
        )
    with pytest.raises(openai.BadRequestError, match="temperature"):
        sdk.chat.completions.create(
            model="gpt-5-nano", messages=[{"role": "user", "content": "hi"}], temperature=0
        )
    ok = sdk.chat.completions.create(
        model="openai/gpt-oss-120b",
        temperature=0,
        max_tokens=5,
        messages=[{"role": "user", "content": "hi"}],
    )
    assert ok.usage.completion_tokens_details.reasoning_tokens == 0
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(api_key="sk-wrong", base_url=server.url, max_retries=0).embeddings.create(
            model="text-embedding-3-small", input=["x"]
        )
    emb = sdk.embeddings.create(model="text-embedding-3-small", input=["a", "b"], dimensions=8)
    assert [len(d.embedding) for d in emb.data] == [8, 8]
    assert [r.status for r in server.requests] == [400, 400, 200, 401, 200]


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts /proc/self/fd")
def test_calls_made_one_at_a_time_leave_no_files_open(run_paths, server, tmp_path):
    """The serving study sends one request a turn, each from a thread pool of its own. Every
    pool's thread opened its own connection to the store of calls and left it open when it
    ended (three files each): a grid of 4,040 turns stopped at "Too many open files"."""
    client = api_client(run_paths, server.url, tmp_path)
    assert client.chat(question(0)).ok
    before = len(os.listdir("/proc/self/fd"))
    for i in range(1, 121):
        assert client.chat(question(i)).ok
    assert len(os.listdir("/proc/self/fd")) - before < 12
    assert len(read_calls(run_paths.calls)) == 121
