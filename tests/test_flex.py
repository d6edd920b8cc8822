"""Flex processing through the real ``openai`` SDK against the local server: the request's
``service_tier``, the longer timeout, OpenAI's 429 ``resource_unavailable``, the ledger's price,
and the refusals before any call."""

from __future__ import annotations

import pytest
from fake_api.openai_server import CHAT_PATH, Action
from llm_helpers import TEST_KEY, api_client, question

from memcost.calls import list_cost, read_calls
from memcost.catalog import FLEX_TIMEOUT_FACTOR
from memcost.llm import BudgetExceeded, FatalAPIError
from memcost.llm.providers import ExecutionUnsupported
from memcost.run import PresetError, run_preset


@pytest.fixture(autouse=True)
def key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", TEST_KEY)
    monkeypatch.setenv("OPENROUTER_API_KEY", TEST_KEY)


def test_a_flex_stage_sends_service_tier_and_its_records_cost_half(run_paths, server, tmp_path):
    client = api_client(run_paths, server.url, tmp_path, execution={"judge": "flex"})
    client.chat_many([question(1, stage="judge"), question(2, stage="read")])
    client.close()
    sent = {r.body["messages"][-1]["content"]: r.body for r in server.requests}
    assert sent["What is item 1?"]["service_tier"] == "flex"
    assert "service_tier" not in sent["What is item 2?"]  # the read stage stays interactive
    assert server.flex.events == [("served", "gpt-5-mini-2025-08-07")]
    records = {r["stage"]: r for r in read_calls(run_paths.calls)}
    assert records["judge"]["execution"] == "flex"
    assert "execution" not in records["read"]
    judge = records["judge"]
    interactive = list_cost({k: v for k, v in judge.items() if k != "execution"})
    assert judge["prompt_tokens"] > 0 and interactive > 0
    assert list_cost(judge) == pytest.approx(interactive / 2)
    # the budget settled the Flex call at the Flex price, the read call at list price
    assert client.budget.spent == pytest.approx(list_cost(judge) + list_cost(records["read"]))


def test_a_flex_request_reserves_its_budget_at_the_flex_price(run_paths, server, tmp_path):
    """A budget between the Flex and the list-price guess: the Flex call is sent, the same call
    interactive is refused before anything is sent."""
    request = question(1, stage="judge")
    probe = api_client(run_paths, server.url, tmp_path)
    guess = probe.budget.estimate(request)
    probe.close()
    limit = 0.75 * guess  # above the Flex reservation (half), below the list-price one
    flex = api_client(
        run_paths, server.url, tmp_path, execution={"judge": "flex"}, max_cost_usd=limit
    )
    assert flex.chat(request).error is None
    flex.close()
    assert len(server.requests) == 1
    interactive = api_client(
        run_paths,
        server.url,
        tmp_path / "other",
        max_cost_usd=limit,
    )
    with pytest.raises(BudgetExceeded, match="would take the run's spend"):
        interactive.chat(question(2, stage="judge"))
    interactive.close()
    assert len(server.requests) == 1


def test_resource_unavailable_is_retried_without_pausing_the_other_workers(
    run_paths, server, tmp_path
):
    server.flex.unavailable = 2
    client = api_client(run_paths, server.url, tmp_path, execution={"judge": "flex"})
    result = client.chat(question(1, stage="judge"))
    client.close()
    assert result.error is None and result.text
    assert server.flex.events == [("unavailable", "gpt-5-mini-2025-08-07")] * 2 + [
        ("served", "gpt-5-mini-2025-08-07")
    ]
    assert server.count(CHAT_PATH, status=429) == 2
    assert (client.stats.flex_unavailable, client.stats.rate_limited) == (2, 0)
    (record,) = read_calls(run_paths.calls)
    assert record["attempts"] == 3 and record["error"] is None and record["execution"] == "flex"


def test_flex_capacity_that_stays_away_stops_the_stage_and_says_so(run_paths, server, tmp_path):
    server.flex.unavailable = 1_000
    client = api_client(
        run_paths,
        server.url,
        tmp_path,
        execution={"judge": "flex"},
        max_consecutive_failures=2,
        max_concurrency=1,
        max_retries=1,
    )
    with pytest.raises(FatalAPIError) as info:
        client.chat_many([question(i, stage="judge") for i in range(4)])
    client.close()
    message = str(info.value)
    assert "2 calls in a row failed after all retries (last: judge call" in message
    assert "Flex processing" in message and "set execution judge: interactive" in message
    assert server.flex.count("unavailable") == 2 * 2  # two calls, each tried twice
    assert server.flex.count("served") == 0


def test_a_flex_request_waits_longer_than_an_interactive_one(run_paths, server, tmp_path):
    timeout = 0.4
    slow = Action(delay_s=timeout * 1.8)  # past the interactive timeout, inside the Flex one
    server.on(lambda path, body: True, slow, times=None)
    client = api_client(
        run_paths,
        server.url,
        tmp_path,
        execution={"judge": "flex"},
        request_timeout_s=timeout,
        max_retries=1,  # the interactive request times out on every attempt
    )
    flex, interactive = client.chat_many([question(1, stage="judge"), question(2, stage="read")])
    client.close()
    assert FLEX_TIMEOUT_FACTOR * timeout > timeout * 1.8
    # Every answer takes 1.8 timeouts, so a Flex answer at all means it waited past the
    # interactive timeout (an attempt may still fail on a connection the server has closed).
    assert flex.error is None
    assert interactive.error is not None and "timeout" in interactive.error


@pytest.mark.parametrize(
    ("options", "request_", "message"),
    [
        (
            {"backend": "openrouter"},
            question(1, stage="judge"),
            "execution judge: flex cannot be used for gpt-5-mini-2025-08-07: "
            "backend 'openrouter' has no Flex processing (only OpenAI's own API does); "
            "set execution judge: interactive, or route gpt-5-mini-2025-08-07 to backend openai",
        ),
        ({"backend": "custom"}, question(1, stage="judge"), "backend 'custom' has no Flex"),
        (
            {},
            question(1, stage="judge", model="gpt-4.1-mini", reasoning_effort=None),
            "execution judge: flex cannot be used for gpt-4.1-mini: the price table "
            "(memcost/assets/prices.csv) sells no "
            "Flex processing for it (flex_multiplier is None); set execution judge: interactive",
        ),
    ],
)
def test_no_flex_here_is_refused_before_any_call(
    run_paths, server, tmp_path, options, request_, message
):
    client = api_client(run_paths, server.url, tmp_path, execution={"judge": "flex"}, **options)
    with pytest.raises(ExecutionUnsupported) as info:
        client.chat(request_)
    client.close()
    assert message in str(info.value) and "\n" not in str(info.value)
    assert server.requests == []  # nothing was sent
    assert not run_paths.calls.exists() or read_calls(run_paths.calls) == []


def test_embeddings_have_no_flex(run_paths, server, tmp_path):
    client = api_client(run_paths, server.url, tmp_path, execution={"embed": "flex"})
    with pytest.raises(
        ExecutionUnsupported,
        match="execution embed: flex cannot be used for text-embedding-3-small",
    ):
        client.embed(["a fact"])
    client.close()
    assert server.requests == []


def test_the_runner_refuses_a_flex_stage_on_openrouter_before_anything_runs(tmp_path):
    run_dir = tmp_path / "run"
    with pytest.raises(PresetError) as info:
        run_preset(
            "smoke",
            run_name=str(run_dir),
            datasets=["locomo"],
            stream=False,
            overrides={"backend": "openrouter", "client": {"execution": {"judge": "flex"}}},
        )
    assert str(info.value).startswith("execution judge: flex cannot be used for ")
    assert "backend 'openrouter' has no Flex processing" in str(info.value)
    assert not run_dir.exists()
