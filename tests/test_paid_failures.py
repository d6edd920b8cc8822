"""Every way a paid call can go wrong, through the real ``openai`` client and the local server:
the item's outcome, what the cache holds afterwards, and what a rerun sends."""

from __future__ import annotations

import time

import pytest
from fake_api.openai_server import CHAT_PATH, Action, FakeOpenAIServer
from llm_helpers import TEST_KEY, api_client, question

from memcost.calls import list_cost, read_calls, record_cost, spent_usd
from memcost.llm.providers import EndpointClient, resolve_endpoint
from memcost.llm.requests import QuotaExhausted


@pytest.fixture
def server():
    with FakeOpenAIServer() as s:
        yield s


@pytest.fixture(autouse=True)
def key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", TEST_KEY)
    monkeypatch.setenv("OPENROUTER_API_KEY", TEST_KEY)


def _bodies(server):
    return [r.body for r in server.requests if r.path == CHAT_PATH]


def _cached(client, request):
    return client.store.has_answer(request.key(client.endpoint_for(request.model).identity))


def test_length_without_content_is_retried_once_with_a_larger_limit(run_paths, server, tmp_path):
    client = api_client(run_paths, server.url, tmp_path)
    request = question(1, max_output_tokens=100)
    server.script(Action(finish_reason="length", content_null=True))
    result = client.chat(request)
    assert result.ok and result.text.startswith("answer-")
    assert result.retried_output_limit == 4_100 and result.calls == 2
    sent = [b["max_completion_tokens"] for b in _bodies(server)]
    assert sent == [100, 4_100]
    records = read_calls(run_paths.calls)
    assert records[0]["error"].startswith("length: the output limit was reached")
    assert records[0]["completion_tokens"] == 16  # the reasoning it was billed for
    assert records[1]["error"] is None and records[1]["output_limit_retry"] == 4_100
    # Only the answer is cached: the truncated reply under the original request is not.
    assert not _cached(client, request)
    assert _cached(client, request.replace(max_output_tokens=4_100))
    client.close()
    # A rerun asks the original request again (it never got an answer), then the retry is cached.
    server.clear()
    server.script(Action(finish_reason="length", content_null=True))
    again = api_client(run_paths, server.url, tmp_path).chat(request)
    assert again.ok and [b["max_completion_tokens"] for b in _bodies(server)] == [100]


def test_length_without_room_to_grow_fails_the_item_and_is_not_cached(run_paths, server, tmp_path):
    client = api_client(run_paths, server.url, tmp_path)
    request = question(2)  # no output limit set: nothing to raise
    server.script(Action(finish_reason="length", content_null=True))
    result = client.chat(request)
    assert not result.ok and result.failure_kind == "length" and result.text == ""
    assert not _cached(client, request)
    assert client.chat(request).ok  # asked again, not served from the cache
    assert server.count() == 2


@pytest.mark.parametrize(
    "action,kind,needle",
    [
        (Action(finish_reason="content_filter", text=""), "content_filter", "filter withheld"),
        (
            Action(refusal="I can't help with that.", content_null=True),
            "refusal",
            "declined to answer: I can't help",
        ),
    ],
)
def test_filtered_and_refused_replies_are_failures(
    run_paths, server, tmp_path, action, kind, needle
):
    client = api_client(run_paths, server.url, tmp_path)
    request = question(3, max_output_tokens=200)
    server.script(action)
    result = client.chat(request)
    assert not result.ok and result.failure_kind == kind and needle in result.error
    assert result.calls == 1  # only a cut-off reply earns the larger-limit retry
    assert not _cached(client, request)
    record = read_calls(run_paths.calls)[0]
    assert needle in record["error"] and record["prompt_tokens"] > 0  # paid, and recorded so
    assert client.chat(request).ok and server.count() == 2  # a rerun asks again


def test_a_400_on_one_item_fails_that_item_and_the_stage_goes_on(run_paths, server, tmp_path):
    client = api_client(run_paths, server.url, tmp_path)
    server.on(lambda path, body: "item 1?" in body["messages"][-1]["content"],
              Action(status=400, error_code="invalid_prompt", message="Invalid prompt: flagged"),
              times=None)  # fmt: skip
    requests = [question(i) for i in range(3)]
    results = client.chat_many(requests)
    assert [r.ok for r in results] == [True, False, True]
    assert results[1].failure_kind == "rejected"
    assert "HTTP 400, invalid_prompt" in results[1].error and "flagged" in results[1].error
    assert [_cached(client, r) for r in requests] == [True, False, True]
    client.close()
    server.clear()
    rerun = api_client(run_paths, server.url, tmp_path).chat_many(requests)
    assert [r.ok for r in rerun] == [True, True, True]
    assert [b["messages"][-1]["content"] for b in _bodies(server)] == ["What is item 1?"]


def test_a_parameter_the_model_rejects_still_stops_the_stage(run_paths, server, tmp_path):
    client = api_client(run_paths, server.url, tmp_path)
    server.script(Action(status=400, error_code="unsupported_parameter"))
    with pytest.raises(Exception, match="retrying cannot help"):
        client.chat_many([question(i) for i in range(3)], desc="x")


def test_429_without_retry_after_waits_for_the_ratelimit_reset(run_paths, server, tmp_path):
    client = api_client(run_paths, server.url, tmp_path)
    server.script(Action(status=429, headers={"x-ratelimit-reset-requests": "40ms",
                                              "x-ratelimit-reset-tokens": "0.4s"}))  # fmt: skip
    t0 = time.perf_counter()
    result = client.chat(question(4))
    waited = time.perf_counter() - t0
    assert result.ok and result.attempts == 2
    assert 0.4 <= waited < 2.0  # the longer reset (the SDK's own backoff may be shorter)
    assert client.stats.rate_limited == 1


def test_a_429_with_retry_after_holds_every_request_of_its_model(run_paths, server, tmp_path):
    client = api_client(run_paths, server.url, tmp_path, max_concurrency=4)
    server.latency_s = 0.05
    server.script(Action(status=429, retry_after_ms=600))
    results = client.chat_many([question(i) for i in range(12)])
    assert all(r.ok for r in results)
    limited = next(r for r in server.requests if r.status == 429)
    # Once the 429 was back (allowing 0.1 s for requests already on their way), nothing was
    # sent until the pause was over; without it the other workers send every ~50 ms.
    quiet = [r for r in server.requests
             if limited.finished + 0.1 < r.arrived < limited.finished + 0.55]  # fmt: skip
    assert quiet == []
    assert server.count() == 13


def test_insufficient_quota_stops_at_once(run_paths, server, tmp_path):
    client = api_client(run_paths, server.url, tmp_path, max_concurrency=2)
    server.on(lambda path, body: True, Action(status=429, error_code="insufficient_quota"),
              times=None)  # fmt: skip
    with pytest.raises(QuotaExhausted, match="no quota left.*stops now.*Add credit"):
        client.chat_many([question(i) for i in range(20)])
    assert server.count() <= 2  # only what was in flight; none retried


def test_openrouter_usage_cost_and_provider_are_recorded_and_preferred(run_paths, server, tmp_path):
    routing = {"order": ["deepinfra"], "allow_fallbacks": False}
    client = api_client(run_paths, server.url, tmp_path, backend="openrouter",
                        provider_routing={"openai/gpt-oss-120b": routing})  # fmt: skip
    request = question(5, model="openai/gpt-oss-120b", temperature=0.0, max_output_tokens=8000)
    server.script(Action(cost=0.0125, served_by="DeepInfra"))
    result = client.chat(request)
    assert result.ok and result.billed_usd == 0.0125 and result.served_by == "DeepInfra"
    body = _bodies(server)[0]
    assert body["provider"] == routing and body["usage"] == {"include": True}
    assert body["max_tokens"] == 8000 and "max_completion_tokens" not in body
    record = read_calls(run_paths.calls)[0]
    assert record["billed_usd"] == 0.0125 and record["served_by"] == "DeepInfra"
    assert record_cost(record) == 0.0125 != list_cost(record)  # billed wins; both are shown
    assert client.budget.spent == pytest.approx(0.0125)  # the guard counts what was billed
    assert client.stats.billed_usd == pytest.approx(0.0125)
    client.close()
    # A rerun of the run replays it from the cache: still the same record, not sent again.
    again = api_client(run_paths, server.url, tmp_path, backend="openrouter")
    assert again.chat(request).billed_usd == 0.0125 and server.count() == 1
    again.close()
    # the bill after the rerun is what the provider billed: one store, one writer, and no
    # command that rewrites records (the old repair-ledger dropped billed_usd and served_by)
    records = read_calls(run_paths.calls)
    assert [(r["served_by"], r["billed_usd"]) for r in records] == [("DeepInfra", 0.0125)]
    assert spent_usd(records) == pytest.approx(0.0125)
    from memcost.cli import build_parser

    commands = build_parser()._subparsers._group_actions[0].choices
    assert not [c for c in commands if "repair" in c or "ledger" in c], sorted(commands)


def test_models_listing_reports_shutdown_dates(server):
    server.models = {"gpt-6.1-terra": "2026-11-01", "gpt-6-luna": None}
    endpoint = resolve_endpoint("openai", base_url=server.url)
    listed = EndpointClient(endpoint, timeout_s=5).list_models()
    assert listed == {"gpt-6.1-terra": "2026-11-01", "gpt-6-luna": None}


def test_prompt_cache_key_is_the_conversation_on_openai(run_paths, server, tmp_path):
    client = api_client(run_paths, server.url, tmp_path)
    client.chat(question(6, tags={"conversation_id": "conv-7"}))
    assert _bodies(server)[0]["prompt_cache_key"] == "conv-7"
    custom = api_client(run_paths, server.url, tmp_path, backend="custom")
    custom.chat(question(7, tags={"conversation_id": "conv-7"}))
    assert "prompt_cache_key" not in _bodies(server)[1]  # only OpenAI routes by it


def test_retries_are_the_sdks_and_their_number_a_client_setting(run_paths, server, tmp_path):
    from memcost.llm.config import ClientConfig
    from memcost.params import ClientSettings

    assert ClientConfig().max_retries == ClientSettings().max_retries == 8
    client = api_client(run_paths, server.url, tmp_path, max_retries=0)
    server.script(Action(status=500, retry_after_ms=1))
    result = client.chat(question(1))
    assert not result.ok and result.attempts == 1 and "gave up after 1 attempts" in result.error


def test_a_long_run_of_429s_says_rate_limited_not_unavailable(run_paths, server, tmp_path):
    from memcost.llm import FatalAPIError

    server.on(lambda path, body: True, Action(status=429, retry_after_ms=1), times=None)
    client = api_client(
        run_paths,
        server.url,
        tmp_path,
        max_consecutive_failures=3,
        max_retries=1,
    )
    with pytest.raises(FatalAPIError) as stop:
        client.chat_many([question(i) for i in range(6)])
    client.close()
    message = str(stop.value)
    assert "rate limited (HTTP 429)" in message and "seems unavailable" not in message
    assert "max_concurrency" in message and "rate_limits" in message
