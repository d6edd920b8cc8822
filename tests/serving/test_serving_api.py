"""The serving replay through the project's client, against the local OpenAI-compatible server."""

from __future__ import annotations

import json
import re

import pandas as pd
import pytest
from fake_api.openai_server import FakeOpenAIServer
from llm_helpers import TEST_KEY, api_client

from memcost.calls import read_calls
from memcost.prompts import MEMORY_EXTRACT
from memcost_serving import replay as stage
from memcost_serving import workload as wl
from memcost_serving.replay import replay
from memcost_serving.systems import ClientEngine, ServingConfig

MODEL = "gpt-5-nano-2025-08-07"


def responder(body):
    user = next(m["content"] for m in body["messages"] if m["role"] == "user")
    wanted = re.search(r"with exactly (\d+) messages", user)
    if wanted:
        texts = [
            f"My cousin Rosa visits on {i + 1} May and I love ramen."
            for i in range(int(wanted.group(1)))
        ]
        return json.dumps({"messages": texts})
    if user.startswith("Session date"):
        return json.dumps(
            {"facts": [{"text": "Maya loves ramen.", "speaker": "Maya", "turns": [1]}]}
        )
    return "Noted, thanks."


@pytest.fixture
def server(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", TEST_KEY)
    with FakeOpenAIServer(api_key=TEST_KEY, responder=responder) as srv:
        yield srv


def test_workloads_and_replay_go_through_the_client(run_paths, server, tmp_path):
    client = api_client(run_paths, server.url, tmp_path)
    paths = stage.ServingPaths.of(run_paths).ensure()
    source = stage.workload_source(paths, "llm", client, MODEL, "low")
    turns = source(25, 40, 0)
    low, high = wl.length_band(40)
    assert len(turns) == 25 and all(low <= t.tokens <= high for t in turns)
    assert wl.workload_path(paths.workloads, 25, 40, 0, "llm-gpt-5-nano-2025-08-07").is_file()

    rows = replay(
        "mem0",
        turns,
        ClientEngine(client, MODEL, "low"),
        ServingConfig(ingest_interval=10),
        labels={},
    )
    answers = [r for r in rows if r["stage"] == "answer"]
    assert len(answers) == 25 and {r["backend"] for r in answers} == {"openai"}
    assert all(r["reasoning_tokens"] > 0 and r["prompt_tokens"] > 0 for r in answers)
    assert [r["turn"] for r in rows if r["stage"] == "ingest_extract"] == [9, 19]
    client.close()
    ledger = read_calls(run_paths.calls)
    kinds = [r["serving_stage"] for r in ledger]
    assert kinds.count("generate") == 2  # 25 turns: blocks of 20 and 5
    assert kinds.count("answer") == 25 and kinds.count("ingest_extract") == 2
    assert {r["stage"] for r in ledger} <= {"extract", "update", "read"}
    # mem0's calls are the main study's requests, tagged with the served system
    extractions = [r for r in ledger if r["serving_stage"] == "ingest_extract"]
    assert {r["prompt_version"] for r in extractions} == {MEMORY_EXTRACT.id}
    assert {r["system"] for r in extractions} == {"mem0"}
    # a second replay is served from the request cache: nothing new reaches the server
    sent = len(server.requests)
    again = api_client(run_paths, server.url, tmp_path)
    replay(
        "mem0",
        source(25, 40, 0),
        ClientEngine(again, MODEL, "low"),
        ServingConfig(ingest_interval=10),
        labels={},
    )
    again.close()
    assert len(server.requests) == sent


def test_notebook_06_over_an_api_checks_the_estimate_then_replays(tmp_path, server, monkeypatch):
    from test_serving_notebook import TINY

    from memcost.run import NotebookFailed, run_preset

    monkeypatch.setenv("SERVING_TEST_KEY", TEST_KEY)
    common = {
        **TINY,
        "backend": "custom",
        "base_url": server.url,
        "client": {"api_key_env": "SERVING_TEST_KEY"},
        "models": [MODEL],
        "price_overrides": {},
        "workload": {"generator": "llm", "model": MODEL},
        "grid": [[15, 50], [20, 80]],
        "extra_cells": {"baselines": []},
        "figure_cells": {"curve": [20, 80], "cost_per_accuracy": [[20, 80]]},
        "systems": ["full_history", "mem0"],
    }
    with pytest.raises(NotebookFailed, match="exceeds max_cost_usd"):
        run_preset(
            "serving_offline_full",
            run_name=str(tmp_path / "poor"),
            stream=False,
            overrides={**common, "max_cost_usd": 1e-7},
        )
    assert not server.requests  # the estimate stopped it before any call
    run = run_preset(
        "serving_offline_full",
        run_name=str(tmp_path / "run"),
        stream=False,
        overrides={**common, "max_cost_usd": 5.0},
    )
    rows = pd.read_parquet(run.root / "serving" / "turns.parquet")
    assert set(rows.loc[rows["stage"] == "answer", "backend"]) == {"custom"}
    assert (rows["reasoning_tokens"] > 0).any()
    ledger = read_calls(run.calls)
    assert {r["serving_stage"] for r in ledger} == {
        "generate",
        "answer",
        "ingest_extract",
        "ingest_update",
    }


def test_the_studys_generation_settings_reach_every_call_of_the_replay(run_paths, server, tmp_path):
    """Total Recall §3 sampled every call at temperature 0.7 with at most 32,768 tokens: the
    answers and the memory's own ingest calls alike, through the real client to the server."""
    key = {"backend": "custom", "api_key_env": "OPENAI_API_KEY"}  # a server of one's own
    client = api_client(run_paths, server.url, tmp_path, **key)
    study = ServingConfig().generation  # the notebook's default system_settings
    assert study == {"temperature": 0.7, "max_output_tokens": 32_768}
    turns = wl.generate_workload(12, 40, 0)
    replay(
        "mem0",
        turns,
        ClientEngine(client, "openai/gpt-oss-20b", "low", study),
        ServingConfig(ingest_interval=10),
        labels={},
    )
    client.close()
    chats = [r.body for r in server.requests if r.path.endswith("/chat/completions")]
    assert len(chats) >= 12 + 1  # an answer per turn and the memory's extraction at turn 10
    assert {(b["temperature"], b["max_tokens"]) for b in chats} == {(0.7, 32_768)}
    assert {b["model"] for b in chats} == {"openai/gpt-oss-20b"}
    # a model that rejects temperature keeps its output limit only
    engine = ClientEngine(api_client(run_paths, server.url, tmp_path), MODEL, "low", study)
    assert engine.generation == {"max_output_tokens": 32_768}
    # nor an output limit above the model's own (gpt-4o-mini writes at most 16,384 tokens)
    small = ClientEngine(api_client(run_paths, server.url, tmp_path), "gpt-4o-mini", "", study)
    assert small.generation == {"temperature": 0.7, "max_output_tokens": 16_384}
    with pytest.raises(ValueError, match="unknown setting"):
        ClientEngine(client, MODEL, "low", {"top_p": 0.9})
