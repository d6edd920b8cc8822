"""Flex on the notebooks' path: notebooks 00-04 on the LoCoMo sample against the local server as
OpenAI (``base_url``), with the judge on Flex and Flex capacity short for a while. The judge's
requests, and only they, carry ``service_tier: "flex"``; its ledger records are tagged and
priced at half; the judgments are those of the all-interactive run on the same answers."""

from __future__ import annotations

import pytest
from fake_api.openai_server import CHAT_PATH
from fake_api.stages import stage_of, stage_server

from memcost.calls import list_cost, read_calls
from memcost.io import read_jsonl
from memcost.run import run_preset

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]
KEY = "sk-memcost-flex-0f3a9c1e5b7d2468ace"
STEPS = ["00", "01", "02", "03", "04"]
PARAMETERS = {"include_no_context": False, "include_oracle": False, "judge_prompts": ["judge"]}
CLIENT = {"model_backends": {}, "request_timeout_s": 20.0, "max_retries": 2}


def _run(tmp_path, url, name, **settings):
    run_dir = tmp_path / name
    run_preset(
        "smoke",
        run_name=str(run_dir),
        datasets=["locomo"],
        steps=STEPS,
        stream=False,
        quiet=True,
        overrides={
            **PARAMETERS,
            "backend": "openai",
            "base_url": url,
            "client": {**CLIENT, **settings},
        },
    )
    return run_dir


def test_a_flex_judge_matches_the_interactive_one_at_half_the_price(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("MEMCOST_TODAY", "2026-11-30")  # the paper's models are still served
    server = stage_server(api_key=KEY, faults=False).start()
    try:
        plain = _run(tmp_path, server.url, "interactive", cache_mode="off")
        plain_log = server.requests
        server.clear()
        server.flex.unavailable = 3
        flex = _run(tmp_path, server.url, "flex", cache_mode="off", execution={"judge": "flex"})
        flex_log = server.requests
    finally:
        server.stop()
    assert all("service_tier" not in (r.body or {}) for r in plain_log)
    chats = [r.body for r in flex_log if r.path == CHAT_PATH]
    tiers = {(stage_of(body), body.get("service_tier")) for body in chats}
    assert ("judge", "flex") in tiers and ("judge", None) not in tiers
    assert {tier for stage, tier in tiers if stage != "judge"} == {None}
    assert server.flex.count("unavailable") == 3 and server.flex.count("served") > 0
    records = read_calls(flex)
    judged = [r for r in records if r["stage"] == "judge"]
    assert judged and all(r.get("execution") == "flex" for r in judged)
    assert all("execution" not in r for r in records if r["stage"] != "judge")
    assert sum(r["attempts"] for r in judged) == len(judged) + 3  # the three 429s were retried
    for record in judged:
        interactive = list_cost({k: v for k, v in record.items() if k != "execution"})
        assert list_cost(record) == pytest.approx(interactive / 2)
    verdicts = [
        [
            (j["question_id"], j["system"], j["vote"], j["label"], j["reason"])
            for j in read_jsonl(run / "locomo" / "judgments.jsonl")
        ]
        for run in (plain, flex)
    ]
    assert sorted(verdicts[0]) == sorted(verdicts[1])
