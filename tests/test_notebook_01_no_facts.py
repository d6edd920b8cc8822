"""Models that give notebook 01 little to work with: one that finds nothing to remember (the
notebook walks through what it can, builds every user with no facts, and finishes; it used to
stop at the walk-through's embedding summary), and one whose update replies cannot be read (a
failed item, shown and recorded; the walk-through used to raise on it)."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from fake_api.openai_server import FakeOpenAIServer
from fake_api.stages import StageResponder, stage_of

from memcost.paths import NOTEBOOKS_DIR
from memcost.run.runner import execute_notebook

pytestmark = pytest.mark.timeout(300)
KEY_ENV, KEY = "MEMCOST_TEST_NOFACTS_KEY", "sk-memcost-nofacts-2b4d6f8a0c1e"


def run_01(prepared_run, tmp_path, monkeypatch, respond) -> tuple[pd.DataFrame, str]:
    """Notebook 01 on LoCoMo against the test server answering with ``respond``: the segments
    table it wrote, and everything its cells printed."""
    run = prepared_run(["locomo"])
    monkeypatch.setenv(KEY_ENV, KEY)
    monkeypatch.setenv("MEMCOST_CACHE_DIR", str(tmp_path / "cache"))
    with FakeOpenAIServer(api_key=KEY, responder=respond) as server:
        execute_notebook(
            NOTEBOOKS_DIR / "01_extract_facts.ipynb",
            tmp_path / "01.ipynb",
            {
                "run_dir": str(run.root),
                "dataset": "locomo",
                "backend": "custom",
                "base_url": server.url,
                "client": {"api_key_env": KEY_ENV},
            },
        )
    segments = pd.read_parquet(run.dataset("locomo").memory / "segments.parquet")
    printed = "".join(
        "".join(o.get("text", ""))
        for c in json.loads((tmp_path / "01.ipynb").read_text(encoding="utf-8"))["cells"]
        for o in c.get("outputs", [])
    )
    return segments, printed


def test_notebook_01_finishes_when_no_segment_gives_a_fact(prepared_run, tmp_path, monkeypatch):
    stages = StageResponder(malformed_every=0)

    def respond(body: dict) -> str:
        return '{"facts": []}' if stage_of(body) == "extract" else stages(body)

    segments, printed = run_01(prepared_run, tmp_path, monkeypatch, respond)
    assert len(segments) and (segments["status"] == "ok").all()
    assert "EMBEDDINGS: 0 facts" in printed
    assert "gave a fact: the update phase has nothing to walk through" in printed


def test_notebook_01_records_an_update_reply_it_cannot_read_as_a_failed_item(
    prepared_run, tmp_path, monkeypatch
):
    """The walk-through shows the failed update call and goes on; the batch records the
    segment as failed (a small local model writes such replies)."""
    stages = StageResponder(malformed_every=0)

    def respond(body: dict) -> str:
        return "I cannot decide." if stage_of(body) == "update" else stages(body)

    segments, printed = run_01(prepared_run, tmp_path, monkeypatch, respond)
    assert (segments["status"] == "failed").any()
    assert "the update call failed" in printed
    assert "this segment is a failed item: no decision is made up for it" in printed
