"""Notebook 03 runs after notebook 00 on a bundled sample, offline, and writes its answer files,
ledger records, figure and metrics; its parameters are declared the way the runner reads them."""

from __future__ import annotations

import json

import pandas as pd

from memcost.answers import REQUIRED_FIELDS, answer_systems
from memcost.calls import read_calls
from memcost.io import read_jsonl
from memcost.params import notebook_parameters
from memcost.paths import DISPLAY_NAMES, NOTEBOOKS_DIR, PARAMS_DIR
from memcost.run import discover_notebooks, load_preset

NOTEBOOK = NOTEBOOKS_DIR / "03_answer_long_context.ipynb"
SHARED = ("backend", "base_url", "max_cost_usd", "price_overrides", "client", "run_dir", "dataset")
STAGE = (
    "models",
    "generation",
    "mode",
    "overflow",
    "window_turns",
    "include_rolling_window",
    "include_no_context",
    "include_oracle",
    "baseline_models",
)


def test_parameters_are_declared_and_readable():
    declared = notebook_parameters(NOTEBOOK)
    assert set(SHARED + STAGE) <= set(declared)
    assert declared["models"]["default"] == '["gpt-5-mini-2025-08-07", "openai/gpt-oss-120b"]'
    assert declared["backend"]["default"] == '"offline"'
    assert declared["window_turns"]["default"] == "10"
    cell = next(
        c
        for c in json.loads(NOTEBOOK.read_text())["cells"]
        if "parameters" in c["metadata"].get("tags", [])
    )
    for line in "".join(cell["source"]).splitlines():
        comment = line.split("  # ", 1)[1]
        assert "=" not in comment, line  # papermill would not see the parameter
    smoke = load_preset(PARAMS_DIR / "smoke.yaml")
    assert smoke.parameters["include_no_context"] is True
    assert smoke.parameters["include_oracle"] is True
    assert "03" in discover_notebooks()


def test_committed_without_outputs():
    notebook = json.loads(NOTEBOOK.read_text())
    assert notebook["metadata"]["kernelspec"]["name"] == "python3"
    for cell in notebook["cells"]:
        if cell["cell_type"] == "code":
            assert cell["outputs"] == [] and cell["execution_count"] is None


def test_notebook_03_offline_after_notebook_00(smoke_run):
    # notebook 03 as the session's smoke run executed it on LoCoMo after notebook 00, with the
    # no-context and oracle baselines (the preset's, checked above)
    run = smoke_run
    ds = run.dataset("locomo")
    questions = pd.read_parquet(ds.questions)
    systems = [
        "long_context_gpt-5-mini",
        "long_context_gpt-oss-120b",
        "rolling_window_gpt-5-mini",
        "no_context_gpt-5-mini",
        "oracle_gpt-5-mini",
    ]
    memories = {
        "memory_mem0_style",
        "memory_rag",
        "memory_graph",
        "memory_hierarchical",
        "memory_observational",
    }  # notebook 02's, one per memory system of the preset
    assert set(answer_systems(ds)) == {*systems, *memories}
    for system in systems:
        records = read_jsonl(ds.answers_file(system))
        assert sorted(r["question_id"] for r in records) == sorted(questions["question_id"])
        for record in records:
            assert set(REQUIRED_FIELDS) | {"context_tokens", "dropped_tokens"} <= set(record)
            assert record["backend"] == "offline" and record["error"] is None
            assert record["system"] == system and record["answer"]

    # the run's ledger holds every notebook's calls; the manifest counts notebook 03's
    calls = [
        c
        for c in read_calls(run.calls)
        if c["dataset"] == "locomo" and c["stage"] == "long_context"
    ]
    assert len(calls) == len(systems) * len(questions)
    assert {c["system"] for c in calls} == set(systems)
    assert {c["model"] for c in calls} == {"gpt-5-mini-2025-08-07", "openai/gpt-oss-120b"}
    assert all(c["question_id"] for c in calls)

    metrics = json.loads((ds.metrics / "03_answer_long_context.json").read_text())["metrics"]
    stats = pd.read_parquet(ds.data / "conversation_stats.parquet")
    assert metrics["history_tokens"]["max"] == stats["history_tokens"].max()
    assert metrics["questions"] == len(questions) and metrics["cache_measured"] is False
    lc = metrics["systems"]["long_context_gpt-5-mini"]
    window = metrics["systems"]["rolling_window_gpt-5-mini"]
    assert lc["answered"] == len(questions) and lc["cached_share_after_first"] is None
    assert lc["context_tokens_per_question"] > 4 * window["context_tokens_per_question"]
    assert lc["latency_p95_s"] >= lc["latency_p50_s"] >= 0
    assert len(metrics["answer_files"]) == len(systems)
    assert (ds.figures / "long_context_prompt_sizes.png").is_file()

    manifest = json.loads(run.manifest.read_text())
    assert manifest["notebooks"]["locomo/03_answer_long_context"]["status"] == "ok"
    assert manifest["llm"]["locomo/03_answer_long_context"]["calls"] == len(calls)  # nothing else
    executed = (ds.notebooks / "03_answer_long_context.ipynb").read_text()
    assert "no provider prompt cache" in executed

    # the simulated cache: its own key and label, never in the ledger's billed usage
    assert all(c["cached_prompt_tokens"] == 0 for c in calls)
    simulated = metrics["simulated_cache"]["long_context_gpt-5-mini"]
    assert simulated["source"].startswith("SIMULATED")
    assert simulated["questions"] == len(questions)
    assert simulated["later_questions"] == len(questions) - questions["conversation_id"].nunique()
    # the sample's longer LoCoMo history is over 1,024 tokens: its later questions hit
    assert 0 < simulated["simulated_cached_tokens"] < lc["prompt_tokens"]
    assert "SIMULATED" in executed and "hit: " in executed
    table = pd.read_csv(ds.table.simulated_prompt_cache).set_index("system")
    assert (
        table.loc["long_context_gpt-5-mini", "simulated_cached_tokens"]
        == (simulated["simulated_cached_tokens"])
    )
    assert table["source"].str.startswith("SIMULATED").all()
    assert DISPLAY_NAMES["locomo"] in executed
