"""The cognee library itself behind the gateway, in its own environment (``make setup-cognee``),
through the real client and the local OpenAI-compatible server: every call of cognee's recorded,
tagged and cached, no key in any file of the run (cognee's databases included), an outage or a
budget stop ending the build with nothing built, a failure for one user failing that user only,
and a recall that reads the passages back with the turns they hold.

Marked slow: each build starts cognee (an 8 s import) and runs its pipeline per user."""

from __future__ import annotations

import pandas as pd
import pytest
from llm_helpers import api_client
from test_memory import yoga_conversation

from memcost.calls import read_calls
from memcost.llm import BudgetExceeded, LLMError
from memcost.paths import RunPaths
from memcost.systems import open_system
from memcost.systems.cognee_library import ENVIRONMENT
from memcost.systems.store import read_done
from memcost.testing.openai_server import CHAT_PATH, Action
from memcost.testing.stages import library_route, stage_server

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]
if not ENVIRONMENT.python().is_file():
    pytest.skip("cognee's environment is missing: make setup-cognee", allow_module_level=True)

PLANTED = "sk-memcost-planted-" + "c0c0a1b2c3d4"


def conversations() -> pd.DataFrame:
    """Two users; the second's Ana is Eva, so that a fault can pick her calls."""
    eva = yoga_conversation("pair-2")
    eva["speaker"] = eva["speaker"].str.replace("Ana", "Eva")
    eva["text"] = eva["text"].str.replace("Ana", "Eva")
    return pd.concat([yoga_conversation("pair-1"), eva])


def open_cognee(run: RunPaths):
    return open_system("cognee", run.dataset("locomo").ensure(), dataset="locomo")


def build(run: RunPaths, server, tmp_path, **options):
    system = open_cognee(run)
    report = system.build(api_client(run, server.url, tmp_path, **options), conversations())
    return system, report


def cognee_calls(path: str, body: dict) -> bool:
    return path == CHAT_PATH and library_route(body) is not None


@pytest.fixture
def upstream(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", PLANTED)
    with stage_server(api_key=PLANTED, faults=False) as server:
        yield server


def test_cognee_through_the_gateway_recorded_cached_and_keyless(upstream, tmp_path):
    first = RunPaths(tmp_path / "first").ensure()
    system, report = build(first, upstream, tmp_path)
    assert (report.built, report.failed) == (2, {})
    assert set(read_done(system.folder)) == {"pair-1", "pair-2"}
    records = pd.DataFrame(read_calls(first.calls))
    assert set(records["library_step"]) == {
        "cognee/extract_graph",
        "cognee/summarize",
        "cognee/embed",
    }
    assert set(records["system"]) == {"memory_cognee"} and set(records["backend"]) == {"openai"}
    assert set(records["conversation_id"]) == {"pair-1", "pair-2"}
    chats = records.loc[records["library_step"] != "cognee/embed"]
    assert chats["stage"].eq("extract").all()
    assert int((~records["cached"].astype(bool)).sum()) == len(upstream.requests)
    state = system.state().set_index("conversation_id")
    assert state.loc["pair-1", "calls"] == int((chats["conversation_id"] == "pair-1").sum())
    # one chunk per session, each with the turns it holds
    items = system.items("pair-1")
    chunks = items.loc[items["kind"] == "chunk"]
    assert len(chunks) == 2 and [len(p) for p in chunks["positions"]] == [4, 3]

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
    assert "chunk" in set(recall.items["kind"]) and recall.tokens > 0
    assert any(len(p) for p in recall.items["positions"])  # evidence recall can be measured

    sent = len(upstream.requests)
    second = RunPaths(tmp_path / "second").ensure()
    build(second, upstream, tmp_path)  # the same disk cache: cognee's own stores start empty
    assert len(upstream.requests) == sent  # nothing sent again
    assert all(r["cached"] for r in read_calls(second.calls))

    leaked = [p for p in tmp_path.rglob("*") if p.is_file() and PLANTED.encode() in p.read_bytes()]
    assert leaked == []


def test_an_outage_fails_the_stage_never_an_empty_memory(upstream, tmp_path):
    upstream.on(cognee_calls, Action(status=500, retry_after="0"), times=None)
    run = RunPaths(tmp_path / "run").ensure()
    with pytest.raises(LLMError):
        build(run, upstream, tmp_path)
    assert read_done(open_cognee(run).folder) == {}


def test_a_budget_stop_ends_the_build_with_nothing_built(upstream, tmp_path):
    run = RunPaths(tmp_path / "run").ensure()
    with pytest.raises(BudgetExceeded):
        build(run, upstream, tmp_path, max_cost_usd=1e-7)
    assert read_done(open_cognee(run).folder) == {}


def test_a_failure_for_one_user_fails_that_user_and_a_rerun_builds_it(upstream, tmp_path):
    def evas(path: str, body: dict) -> bool:
        return cognee_calls(path, body) and "Eva" in str(body["messages"])

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
