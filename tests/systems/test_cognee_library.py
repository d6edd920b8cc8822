"""The cognee library itself behind the gateway, in its own environment (``make setup-cognee``),
through the real client and the local OpenAI-compatible server: every call of cognee's recorded,
tagged and cached, no key in any file of the run (cognee's databases included), and a recall
that reads the passages back with the turns they hold. (Its faults: test_library_faults.py.)

Marked slow: each build starts cognee (an 8 s import) and runs its pipeline per user."""

from __future__ import annotations

import pandas as pd
import pytest
from library_helpers import PLANTED, build, needs
from llm_helpers import api_client

from memcost.calls import read_calls
from memcost.memory.base import read_done
from memcost.paths import RunPaths

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900), needs("cognee")]


def test_cognee_through_the_gateway_recorded_cached_and_keyless(library_upstream, tmp_path):
    first = RunPaths(tmp_path / "first").ensure()
    system, report = build("cognee", first, library_upstream, tmp_path)
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
    assert int((~records["cached"].astype(bool)).sum()) == len(library_upstream.requests)
    state = system.state().set_index("conversation_id")
    assert state.loc["pair-1", "calls"] == int((chats["conversation_id"] == "pair-1").sum())
    # one chunk per session, each with the turns it holds
    items = system.items("pair-1")
    chunks = items.loc[items["kind"] == "chunk"]
    assert len(chunks) == 2 and [len(p) for p in chunks["positions"]] == [4, 3]

    client = api_client(first, library_upstream.url, tmp_path)
    recall = system.recall(
        client,
        pd.DataFrame(
            {
                "question_id": ["q1"],
                "conversation_id": ["pair-1"],
                "question": ["How often does Ana go to yoga?"],
            }
        ),
    )["q1"]
    client.close()  # its store's files stay as they are while they are scanned below
    assert "chunk" in set(recall.items["kind"]) and recall.tokens > 0
    assert any(len(p) for p in recall.items["positions"])  # evidence recall can be measured

    sent = len(library_upstream.requests)
    second = RunPaths(tmp_path / "second").ensure()
    # the first run's answers (client: reuse_runs); cognee's own stores start empty
    build("cognee", second, library_upstream, tmp_path, reuse_runs=[str(first.root)])
    assert len(library_upstream.requests) == sent  # nothing sent again
    assert all(r["cached"] for r in read_calls(second.calls))

    leaked = [p for p in tmp_path.rglob("*") if p.is_file() and PLANTED.encode() in p.read_bytes()]
    assert leaked == []
