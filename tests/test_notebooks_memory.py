"""Notebooks 01 and 02 end to end under papermill, offline, on the bundled LoCoMo sample."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest

from memcost.calls import read_calls
from memcost.io import read_json, read_jsonl
from memcost.memory.segments import plan_users
from memcost.params import notebook_parameters
from memcost.paths import PARAMS_DIR
from memcost.run import discover_notebooks, load_preset

# a hang guard; notebook executions are slow on a busy 2-core machine
pytestmark = pytest.mark.timeout(600)

SHARED = ("run_dir", "dataset", "backend", "base_url", "max_cost_usd", "price_overrides", "client")


def test_parameters_cells_declare_the_shared_and_stage_parameters():
    notebooks = discover_notebooks()
    p01 = notebook_parameters(notebooks["01"])
    p02 = notebook_parameters(notebooks["02"])
    for declared in (p01, p02):
        assert list(declared)[: len(SHARED)] == list(SHARED)
        assert declared["backend"]["default"] == '"offline"'
        assert declared["max_cost_usd"]["default"] == "50.0"
    assert p01["batch_size"]["default"] == "10" and "§3.1" in p01["batch_size"]["help"]
    assert p01["max_segment_chars"]["default"] == "8000"
    assert p01["extraction_reasoning_effort"]["default"] == '"low"'
    assert p02["top_k"]["default"] == "20" and p02["ef_search"]["default"] == "40"
    assert p02["reader_reasoning_effort"]["default"] == '"medium"'
    smoke = load_preset(PARAMS_DIR / "smoke.yaml")
    mine = {"batch_size", "max_segment_chars", "update_phase", "top_k", "ef_search"}
    assert mine <= set(smoke.parameters) and mine <= set(p01) | set(p02)


@pytest.fixture(scope="module")
def memory_run(smoke_run):
    """Notebooks 00, 01 and 02 as the session's smoke run executed them (offline, the paper's
    memory settings, which are the notebooks' defaults)."""
    return smoke_run


def cell_texts(notebook: Path) -> list[str]:
    """Each code cell's outputs as text (streams, plain-text results, HTML tables)."""
    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    texts = []
    for cell in cells:
        if cell["cell_type"] != "code":
            continue
        parts = []
        for output in cell.get("outputs", []):
            parts.append("".join(output.get("text", "")))
            data = output.get("data", {})
            parts.append("".join(data.get("text/plain", "")) + "".join(data.get("text/html", "")))
        texts.append("\n".join(parts))
    return texts


def test_notebook_01_walks_one_user_through_the_update_phase_before_the_build(memory_run):
    ds = memory_run.dataset("locomo")
    outputs = cell_texts(ds.notebooks / "01_extract_facts.ipynb")
    build = next(i for i, text in enumerate(outputs) if "extraction calls" in text)

    def first(marker: str) -> int:
        return next(i for i, text in enumerate(outputs) if marker in text)

    walk = [
        first(m)
        for m in (
            "SEGMENT ",
            "FACTS of segment",
            "EMBEDDINGS:",
            "NEAREST stored facts for segment",
            "DECISION per new fact",
            "FACT TABLE of",
        )
    ]
    assert walk == sorted(walk) and walk[-1] < build
    segment_text = outputs[walk[0]]
    assert "[1] " in segment_text and "[2] " in segment_text
    # The facts cite the prompt's 1-based message numbers (a fact from [2] shows turns [2]).
    facts_html = outputs[walk[1]]
    assert "turns" in facts_html and "positions" in facts_html
    nearest = outputs[walk[3]]
    assert "nearest stored fact" in nearest and "cosine" in nearest
    decisions = outputs[walk[4]]
    assert "decision" in decisions and any(d in decisions for d in ("ADD", "UPDATE", "NOOP"))
    table = outputs[walk[5]]
    assert "active" in table and "fact_id" in table
    # The walk-through used the package's steps: the build wrote the same first facts.
    assert "are those of the walk-through: True" in "".join(outputs)


def test_notebooks_01_and_02_offline_on_locomo(memory_run):
    run = memory_run
    ds = run.dataset("locomo")

    m01 = read_json(ds.metrics / "01_extract_facts.json")["metrics"]
    facts = pd.read_parquet(ds.memory / "facts.parquet")
    active = facts.loc[facts["status"] == "active"]
    conversations = pd.read_parquet(ds.conversations)
    users = sorted(conversations["conversation_id"].unique())
    plans = plan_users(conversations, users)
    assert m01["users"] == len(users) == 2 and m01["users_built"] == 2
    assert m01["segments"] == sum(len(p.segments) for p in plans.values()) == 18
    assert m01["segments_failed"] == 0 and m01["split_messages"] == 0
    assert m01["active_facts"] == len(active) and m01["facts_written"] == len(facts)
    assert m01["facts_per_user_mean"] == round(len(active) / 2, 2)
    assert 20 <= m01["facts_per_user_min"] <= m01["facts_per_user_max"] <= 60
    assert m01["decisions"]["UPDATE"] >= 1 and sum(m01["decisions"].values()) == len(facts)
    assert 1.0 < m01["compression_ratio"] < 3.0  # offline keeps whole sentences
    assert m01["llm_parse_failures"] == 0 and m01["estimated_usd"] > 0 and m01["paid_usd"] == 0
    for user in users:
        table = pd.read_parquet(ds.memory / "index" / f"{user}.parquet")
        assert (
            table["fact_id"].tolist()
            == active.loc[active["conversation_id"] == user, "fact_id"].tolist()
        )
    assert (ds.figures / "memory_facts_vs_history.png").stat().st_size > 5_000

    m02 = read_json(ds.metrics / "02_answer_from_memory.json")["metrics"]
    questions = pd.read_parquet(ds.questions)
    records = read_jsonl(ds.answers_file("memory_mem0_style"))
    assert m02["questions"] == len(records) == len(questions) == 33
    assert m02["errors"] == 0 and m02["cross_user_retrievals"] == 0
    assert m02["retrieved_facts_mean"] == 20.0 and m02["index_recall_vs_exact"] == 1.0
    assert 200 < m02["retrieved_tokens_mean"] < 1_500
    assert m02["questions_with_evidence"] == 33
    assert 0.5 <= m02["evidence_recall"] <= m02["evidence_in_memory"] <= 1.0
    assert set(m02["evidence_recall_by_category"]) == set(questions["category"])
    assert m02["search_latency_p50_ms"] < 50
    recall = pd.Series([r["evidence_recall"] for r in records], dtype=float)
    assert m02["evidence_recall"] == round(float(recall.mean()), 4)
    assert 0 < m02["lexical_match_rate"] < 1

    manifest = json.loads(run.manifest.read_text(encoding="utf-8"))
    assert manifest["llm"]["locomo/01_extract_facts"]["calls"] == m01["llm_calls"]
    assert manifest["llm"]["locomo/02_answer_from_memory"]["calls"] == m02["llm_calls"]
    stages = {"extract", "update", "embed", "read"}  # notebooks 01 and 02 of this dataset
    calls = [c for c in read_calls(run.calls) if c["dataset"] == "locomo" and c["stage"] in stages]
    assert {c["stage"] for c in calls} == stages
    assert {c["model"] for c in calls if c["stage"] == "read"} == {"gpt-5-mini-2025-08-07"}
    assert {c["model"] for c in calls if c["stage"] == "extract"} == {"gpt-5-nano-2025-08-07"}
    queries = [c for c in calls if c["stage"] == "embed" and c["question_id"]]
    # the smoke preset builds all five memory systems on LoCoMo: each embeds every question
    assert Counter(c["system"] for c in queries) == dict.fromkeys(
        [
            "memory_mem0_style",
            "memory_rag",
            "memory_graph",
            "memory_hierarchical",
            "memory_observational",
        ],
        33,
    )
