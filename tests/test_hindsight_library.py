"""The Hindsight server itself behind the gateway, in its own environment
(``make setup-hindsight``), through the real client and the local OpenAI-compatible server:
every call of Hindsight's recorded, tagged and cached, no key in any file of the run (its
database included), an outage or a budget stop ending the build with nothing built, a failure
for one user failing that user only, and a recall whose memories know their turns.

Marked slow: each build starts PostgreSQL and the Hindsight server."""

from __future__ import annotations

import pandas as pd
import pytest
from llm_helpers import api_client
from test_memory import yoga_conversation

from memcost.calls import read_calls
from memcost.llm import BudgetExceeded, LLMError
from memcost.paths import RunPaths
from memcost.systems import open_system
from memcost.systems.hindsight_library import ENVIRONMENT
from memcost.systems.store import read_done
from memcost.testing.openai_server import CHAT_PATH, Action
from memcost.testing.stages import library_route, stage_server

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]
if not ENVIRONMENT.python().is_file():
    pytest.skip("Hindsight's environment is missing: make setup-hindsight", allow_module_level=True)

PLANTED = "sk-memcost-planted-" + "41d5a1b2c3d4"


def conversations() -> pd.DataFrame:
    """Two users; the second's Ana is Eva, so that a fault can pick her calls."""
    eva = yoga_conversation("pair-2")
    eva["speaker"] = eva["speaker"].str.replace("Ana", "Eva")
    eva["text"] = eva["text"].str.replace("Ana", "Eva")
    return pd.concat([yoga_conversation("pair-1"), eva])


def open_hindsight(run: RunPaths):
    return open_system("hindsight", run.dataset("locomo").ensure(), dataset="locomo")


def build(run: RunPaths, server, tmp_path, **options):
    system = open_hindsight(run)
    report = system.build(api_client(run, server.url, tmp_path, **options), conversations())
    return system, report


def hindsight_calls(path: str, body: dict) -> bool:
    return path == CHAT_PATH and library_route(body) is not None


@pytest.fixture
def upstream(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", PLANTED)
    with stage_server(api_key=PLANTED, faults=False) as server:
        yield server


def test_hindsight_through_the_gateway_recorded_cached_and_keyless(upstream, tmp_path):
    first = RunPaths(tmp_path / "first").ensure()
    system, report = build(first, upstream, tmp_path)
    assert (report.built, report.failed) == (2, {})
    assert set(read_done(system.folder)) == {"pair-1", "pair-2"}
    records = pd.DataFrame(read_calls(first.calls))
    assert set(records["library_step"]) == {
        "hindsight/retain",
        "hindsight/consolidate",
        "hindsight/embed",
    }
    assert set(records["system"]) == {"memory_hindsight"} and set(records["backend"]) == {"openai"}
    assert set(records["conversation_id"]) == {"pair-1", "pair-2"}  # consolidation included
    steps = records.groupby("library_step")["stage"].first().to_dict()
    assert steps == {
        "hindsight/retain": "extract",
        "hindsight/consolidate": "update",
        "hindsight/embed": "embed",
    }
    assert int((~records["cached"].astype(bool)).sum()) == len(upstream.requests)
    chats = records.loc[records["library_step"] != "hindsight/embed"]
    state = system.state().set_index("conversation_id")
    assert state.loc["pair-1", "calls"] == int((chats["conversation_id"] == "pair-1").sum())
    items = system.items("pair-1")
    assert {"fact", "observation"} <= set(items["kind"])
    assert all(len(p) for p in items["positions"])  # every memory knows its turns

    recall = system.recall(
        api_client(first, upstream.url, tmp_path),
        pd.DataFrame(
            {
                "question_id": ["q1"],
                "conversation_id": ["pair-1"],
                "question": ["How often does Ana go to yoga?"],
            }
        ),
    )["q1"]
    assert len(recall.items) and recall.tokens > 0
    assert any("yoga" in t for t in recall.texts)
    assert any(len(p) for p in recall.items["positions"])

    # a rerun of the run sends nothing: its users are built. (A new run cannot be served from
    # the cache: Hindsight's consolidation prompts name its facts by random ids.)
    sent = len(upstream.requests)
    _, again = build(first, upstream, tmp_path)
    assert (again.resumed, again.built) == (2, 0) and len(upstream.requests) == sent

    # every file of the run and the cache, PostgreSQL's included
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    leaked = [p for p in files if PLANTED.encode() in p.read_bytes()]
    assert leaked == []


def test_an_outage_fails_the_stage_never_an_empty_memory(upstream, tmp_path):
    upstream.on(hindsight_calls, Action(status=500, retry_after="0"), times=None)
    run = RunPaths(tmp_path / "run").ensure()
    with pytest.raises(LLMError):
        build(run, upstream, tmp_path)
    assert read_done(open_hindsight(run).folder) == {}


def test_a_budget_stop_ends_the_build_with_nothing_built(upstream, tmp_path):
    run = RunPaths(tmp_path / "run").ensure()
    with pytest.raises(BudgetExceeded):
        build(run, upstream, tmp_path, max_cost_usd=1e-7)
    assert read_done(open_hindsight(run).folder) == {}


def test_a_failure_for_one_user_fails_that_user_and_a_rerun_builds_it(upstream, tmp_path):
    def evas(path: str, body: dict) -> bool:
        return hindsight_calls(path, body) and "Eva" in str(body["messages"])

    upstream.on(evas, Action(status=400), times=None)  # a request the API refuses, every time
    run = RunPaths(tmp_path / "run").ensure()
    system, report = build(run, upstream, tmp_path)
    assert report.built == 1 and set(report.failed) == {"pair-2"}
    assert "HTTP 400" in report.failed["pair-2"] or "400" in report.failed["pair-2"]
    assert set(read_done(system.folder)) == {"pair-1"}
    upstream.clear()
    system, report = build(run, upstream, tmp_path)
    assert (report.resumed, report.built, report.failed) == (1, 1, {})
    assert set(read_done(system.folder)) == {"pair-1", "pair-2"}
