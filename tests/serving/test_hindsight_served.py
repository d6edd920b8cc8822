"""Hindsight served turn by turn (notebook 06): the real server in its own environment
(``make setup-hindsight``), its calls the turn's ingest rows, a failed call a failed row.

Marked slow: the replay starts PostgreSQL and the Hindsight server."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from library_helpers import needs

from memcost_serving.replay import replay
from memcost_serving.systems import OfflineEngine, ServingConfig
from memcost_serving.workload import generate_workload
from memcost_systems.hindsight_library import _SERVED, close_served

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900), needs("hindsight")]


def stages_at(rows, turn):
    return [r["stage"] for r in rows if r["turn"] == turn]


def test_hindsight_retains_every_interval_and_recalls_every_turn():
    turns = generate_workload(30, 50, seed=0)
    try:
        rows = replay("hindsight", turns, OfflineEngine(), ServingConfig(), labels={})
    finally:
        close_served()
    assert not _SERVED  # the server and its database are stopped
    fired = sorted({r["turn"] for r in rows if r["gate_fired"]})
    assert fired == [9, 19, 29]  # the ingest interval: the 10th, 20th and 30th message
    for turn in fired:
        at = stages_at(rows, turn)
        assert at[:2] == ["retrieve", "answer"] and "ingest_extract" in at
        assert "ingest_update" in at and at[-1] == "ingest_embed"  # consolidation, embeddings
    assert stages_at(rows, 10) == ["retrieve", "answer"]
    assert all(r["error"] is None for r in rows)
    before = [r for r in rows if r["turn"] < 10]
    after = [r for r in rows if r["turn"] >= 10]
    assert {r["memory_items"] for r in before} == {0}
    assert min(r["memory_items"] for r in after) > 0
    assert [r["pending_tokens"] for r in rows if r["turn"] == 10][0] == 0
    # from the first retain on, the answers carry what the recall returned
    answer = {r["turn"]: r["prompt_tokens"] for r in rows if r["stage"] == "answer"}
    assert max(answer[t] for t in range(10, 30)) > 2 * max(answer[t] for t in range(10))


class RejectsFirstExtraction(OfflineEngine):
    """The offline engine, with the first fact extraction refused as an API would (HTTP 400)."""

    refused = 0

    def chat(self, request, offline, parse=None, *, stage=""):
        result = super().chat(request, offline, parse, stage=stage)
        if stage == "ingest_extract" and not self.refused:
            self.refused += 1
            return replace(result, text="", error="HTTP 400: refused", failure_kind="rejected")
        return result


def test_a_refused_call_is_the_turns_failed_row_and_the_replay_goes_on():
    turns = generate_workload(21, 50, seed=1)
    try:
        rows = replay("hindsight", turns, RejectsFirstExtraction(), ServingConfig(), labels={})
    finally:
        close_served()
    failed = [r for r in rows if r["error"]]
    assert [(r["turn"], r["stage"]) for r in failed] == [(9, "ingest_extract")]
    assert "refused" in failed[0]["error"]
    assert not any(r["memory_items"] for r in rows if r["turn"] == 19)  # nothing was kept
    assert all(r["memory_items"] for r in rows if r["turn"] == 20)  # the next retain held


def test_hindsight_served_through_the_client_is_recorded_turn_by_turn(library_upstream, tmp_path):
    """The paid path: the server's calls go through the project's client to an API (the local
    server), each recorded with the served system, the turn and its serving stage."""
    import pandas as pd
    from llm_helpers import api_client

    from memcost.calls import read_calls
    from memcost.paths import RunPaths
    from memcost_serving.systems import ClientEngine

    run = RunPaths(tmp_path / "run").ensure()
    config = ServingConfig()
    client = api_client(run, library_upstream.url, tmp_path)
    engine = ClientEngine(client, "gpt-5-mini-2025-08-07", "low", config.generation)
    try:
        rows = replay("hindsight", generate_workload(20, 50, seed=2), engine, config, labels={})
    finally:
        close_served()
        client.close()
    assert all(r["error"] is None for r in rows)
    assert {r["backend"] for r in rows if not r["stage"].endswith(("retrieve", "embed"))} == {
        "openai"
    }  # the similarity search embeds locally in both modes
    records = pd.DataFrame(read_calls(run.calls))
    memory = records[records["library_step"].notna()]
    assert set(memory["system"]) == {"hindsight"} and set(memory["model"]) == {
        "gpt-5-mini-2025-08-07"
    }
    chats = memory[memory["library_step"] != "hindsight/embed"]
    assert set(chats["serving_stage"]) == {"ingest_extract", "ingest_update"}
    assert sorted(set(chats["turn"].astype(int))) == [9, 19]  # the two retains
    # Hindsight sets no reasoning effort: its calls go at the served one, as Mem0's
    sent = [r.body for r in library_upstream.requests if r.path.endswith("/chat/completions")]
    hindsight = [b for b in sent if "SIGNIFICANT facts" in json.dumps(b)]
    assert hindsight and {b.get("reasoning_effort") for b in hindsight} == {"low"}
    # every chat call the server made is one ingest row of its turn
    ingest = [r for r in rows if r["stage"] in ("ingest_extract", "ingest_update")]
    assert len(ingest) == len(chats)
    assert sum(r["prompt_tokens"] for r in ingest) == int(chats["prompt_tokens"].sum())
