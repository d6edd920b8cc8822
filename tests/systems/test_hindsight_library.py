"""The Hindsight server itself behind the gateway, in its own environment
(``make setup-hindsight``), through the real client and the local OpenAI-compatible server:
every call of Hindsight's recorded, tagged and cached, its consolidation included, no key in any
file of the run (its database included), and a recall whose memories know their turns. (Its
faults: test_library_faults.py.)

Marked slow: each build starts PostgreSQL and the Hindsight server."""

from __future__ import annotations

import pandas as pd
import pytest
from library_helpers import PLANTED, build, needs
from llm_helpers import api_client

from memcost.calls import read_calls
from memcost.memory.base import read_done
from memcost.paths import RunPaths

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900), needs("hindsight")]


def test_hindsight_through_the_gateway_recorded_cached_and_keyless(library_upstream, tmp_path):
    first = RunPaths(tmp_path / "first").ensure()
    system, report = build("hindsight", first, library_upstream, tmp_path)
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
    assert int((~records["cached"].astype(bool)).sum()) == len(library_upstream.requests)
    chats = records.loc[records["library_step"] != "hindsight/embed"]
    state = system.state().set_index("conversation_id")
    assert state.loc["pair-1", "calls"] == int((chats["conversation_id"] == "pair-1").sum())
    items = system.items("pair-1")
    assert {"fact", "observation"} <= set(items["kind"])
    assert all(len(p) for p in items["positions"])  # every memory knows its turns

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
    assert len(recall.items) and recall.tokens > 0
    assert any("yoga" in t for t in recall.texts)
    assert any(len(p) for p in recall.items["positions"])

    # a rerun of the run sends nothing: its users are built. (A new run cannot be served from
    # the cache: Hindsight's consolidation prompts name its facts by random ids.)
    sent = len(library_upstream.requests)
    _, again = build("hindsight", first, library_upstream, tmp_path)
    assert (again.resumed, again.built) == (2, 0) and len(library_upstream.requests) == sent

    # every file of the run and the cache, PostgreSQL's included
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    leaked = [p for p in files if PLANTED.encode() in p.read_bytes()]
    assert leaked == []
