"""Pacing to the account's rate limits: through the real client, against the local server
emulating per-model RPM/TPM limits with OpenAI's headers and 429s (a minute shortened to one
second on both sides, so the tests take seconds)."""

from __future__ import annotations

import time

import pytest
from fake_api.openai_server import AccountLimits, Action, FakeOpenAIServer
from llm_helpers import TEST_KEY, api_client, question

from memcost.llm import transport as pacing
from memcost.llm.providers import Reading
from memcost.llm.transport import Limits, parse_rate_limits

MODEL = "gpt-5-mini-2025-08-07"


@pytest.fixture(autouse=True)
def key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", TEST_KEY)


@pytest.fixture
def short_minute(monkeypatch):
    monkeypatch.setattr(pacing, "WINDOW_S", 1.0)
    return 1.0


@pytest.fixture
def limited_server(short_minute):
    with FakeOpenAIServer(latency_s=0.02, limits=AccountLimits(window_s=short_minute)) as srv:
        yield srv


def _run(run_paths, server, tmp_path, n, **options):
    client = api_client(run_paths, server.url, tmp_path, max_concurrency=16, **options)
    t0 = time.perf_counter()
    results = client.chat_many([question(i) for i in range(n)])
    elapsed = time.perf_counter() - t0
    state = {s["model"]: s for s in client.transport.pacer.state()}[MODEL]
    client.close()
    assert all(r.ok for r in results)
    return elapsed, state


def test_it_slows_before_the_limit_when_remaining_runs_low(run_paths, limited_server, tmp_path):
    limited_server.limits.set(MODEL, rpm=10)  # ten a (shortened) minute, none stated up front
    elapsed, state = _run(run_paths, limited_server, tmp_path, 30)
    assert limited_server.limits.refused.get(MODEL, 0) == 0  # the headers kept it under
    assert limited_server.limits.admitted[MODEL] == 30
    assert state["rpm"] == 10  # learned from x-ratelimit-limit-requests
    assert 1.5 < elapsed < 6  # 20 past the first full bucket, at ~10 a second


def test_it_speeds_up_when_the_headers_show_headroom(run_paths, limited_server, tmp_path):
    limited_server.limits.set(MODEL, rpm=400)
    stated = {MODEL: {"rpm": 2}}  # far below the account's real limit
    elapsed, state = _run(run_paths, limited_server, tmp_path, 40, rate_limits=stated)
    assert state["rpm"] == 400  # the account's limit replaced the stated one
    assert state["concurrency"] > pacing.START_CONCURRENCY  # replies showed headroom
    assert elapsed < 3  # at the stated 2 a second, 40 requests would take 19 s


def test_it_holds_to_a_stated_limit_before_any_reply(run_paths, short_minute, tmp_path):
    with FakeOpenAIServer(latency_s=0.0) as server:  # sends no rate-limit headers at all
        elapsed, state = _run(run_paths, server, tmp_path, 16, rate_limits={MODEL: {"rpm": 8}})
    assert state["rpm"] == 8
    assert elapsed > 0.8  # 7.6 in the first bucket, the rest at 7.6 a second


def test_after_a_burst_of_429s_it_does_not_resend_them_all_at_once(
    run_paths, short_minute, tmp_path
):
    limited = Action(
        status=429,
        headers={
            "x-ratelimit-limit-requests": "20",
            "x-ratelimit-remaining-requests": "0",
            "x-ratelimit-reset-requests": "1s",
        },
    )
    with FakeOpenAIServer(latency_s=0.05) as server:
        server.script(*[limited] * 4)  # the whole first wave is refused
        elapsed, state = _run(run_paths, server, tmp_path, 8)
        log = sorted(server.requests, key=lambda r: r.arrived)
        refused = [r.body for r in log if r.status == 429]
        retries = sorted(r.arrived for r in log[4:] if r.body in refused)
        later = [r.arrived for r in log[4:]]
    assert state["rate_limited"] == 4
    assert len(retries) == 4
    # Each retry waits the server's hint, jittered, then leaves at the bucket's refill: the four
    # never come back together (without the jitter and the drain they arrive within a millisecond
    # or two). Within the account's 20 a second, two or three may still land close together.
    bunched = max(sum(1 for t in retries if a <= t < a + 0.02) for a in retries)
    assert bunched < 4, [round(t - retries[0], 3) for t in retries]
    assert later[-1] - later[0] > 0.15  # the requests after the refusals are spread out too


def test_a_reply_s_headers_are_read():
    reading = Reading.from_headers(
        {
            "x-ratelimit-limit-requests": "500",
            "x-ratelimit-remaining-requests": "499",
            "x-ratelimit-limit-tokens": "500000",
            "x-ratelimit-remaining-tokens": "498000",
        }
    )
    assert reading == Reading(500, 500_000, 499, 498_000)
    assert Reading.from_headers({"content-type": "application/json"}) is None


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"gpt-5-mini": {"rpm": 0}}, r"rate_limits\['gpt-5-mini'\].rpm = 0: must be a positive"),
        ({"gpt-5-mini": {"rpm": "fast"}}, r"rpm = 'fast': must be a positive number"),
        ({"gpt-9-imaginary": {"rpm": 5}}, r"rate_limits\['gpt-9-imaginary'\]: unknown model"),
        ({"gpt-5-mini": {"rps": 5}}, r"expected \{rpm: N, tpm: N\}"),
        ([500], r"expected a mapping of model to"),
    ],
)
def test_a_bad_rate_limit_is_refused_in_one_line(value, message):
    from memcost.catalog import is_known

    with pytest.raises(ValueError, match=message) as info:
        parse_rate_limits(value, known=is_known)
    assert "\n" not in str(info.value)


def test_a_bad_rate_limit_in_a_preset_stops_the_run_before_anything_runs(tmp_path):
    from memcost.run import discover_notebooks, resolve_preset
    from memcost.run.presets import PresetError, validate_run

    preset = resolve_preset(
        "smoke",
        discover_notebooks(),
        datasets=["locomo"],
        overrides={"client": {"rate_limits": {"gpt-5-mini": {"tpm": -1}}}},
    )
    with pytest.raises(PresetError, match=r"^parameter client.rate_limits\['gpt-5-mini'\].tpm"):
        validate_run(preset, discover_notebooks(), tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_stated_limits_parse_and_an_unknown_model_is_never_silently_unpaced():
    assert parse_rate_limits({"gpt-5-mini": {"rpm": 500, "tpm": 500_000}}) == {
        "gpt-5-mini": Limits(rpm=500.0, tpm=500_000.0)
    }
    assert parse_rate_limits(None) == {}
