"""Notebook 06 end to end under papermill on a tiny grid, and its runner hook."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from memcost.run import discover_notebooks, load_preset, run_preset
from memcost.run.presets import default_steps
from memcost.run.runner import study_notebooks
from memcost_serving import study
from memcost_serving.replay import TURN_COLUMNS, read_turns

# a hang guard; notebook executions are slow on a busy 2-core machine
pytestmark = pytest.mark.timeout(600)
TINY = {  # settings groups given in part: the notebook completes them from its defaults
    "grid": [[15, 50], [15, 120], [40, 80]],
    "seeds": 1,
    "extra_cells": {"baselines": [[30, 40]], "baseline_repeats": 1},
    "system_settings": {"observer_tokens": 1200, "reflector_tokens": 300},
    "n_bootstrap": 50,
    "figure_cells": {"curve": [40, 80], "cost_per_accuracy": [[40, 80]]},
    "real_histories": {"datasets": []},
}


@pytest.fixture(scope="module")
def executed(tmp_path_factory):
    from memcost.run.runner import execute_notebook

    run = tmp_path_factory.mktemp("serving") / "run"
    out = run / "notebooks" / "06_serving_cost_study.ipynb"
    execute_notebook(study_notebooks()["06"], out, {"run_dir": str(run), **TINY})
    return run


def test_it_writes_the_turn_rows_tables_and_figures(executed):
    turns = read_turns(executed / "serving" / "turns.parquet")
    assert list(turns.columns[: len(TURN_COLUMNS)]) == list(TURN_COLUMNS)
    assert set(turns["system"]) == {"full_history", "rolling_window", "mem0", "observational"}
    assert set(turns["backend"]) <= {"offline", "local"}
    assert {"observer", "reflector", "ingest_extract", "ingest_update"} <= set(turns["stage"])
    assert (turns["usd"] > 0).any() and turns["gate_fired"].any()
    tables = executed / "serving" / "tables"
    for name in (
        "table1_exponents",
        "table1_vs_study",
        "table8_break_even",
        "table7_token_ratios",
        "cpa_40x80",
        "loocv_cells",
        "memory_state_model",
    ):
        assert (tables / f"{name}.csv").stat().st_size > 50, name
    for name in ("figure2_cumulative_cost", "residuals_per_cell", "cost_per_turn"):
        assert (executed / "serving" / "figures" / f"{name}.png").stat().st_size > 10_000


def test_the_memory_systems_held_out_errors_are_set_against_the_studys_ranges(executed):
    """The sentence is computed from the table, with the study's ranges as it prints them."""
    versus = pd.read_csv(executed / "serving" / "tables" / "table1_vs_study.csv")
    mem0 = versus[(versus["system"] == "mem0") & (versus["quantity"] == "loocv_mape")].iloc[0]
    assert mem0["published"] == "18.4–22.2"
    notebook = json.loads((executed / "notebooks" / "06_serving_cost_study.ipynb").read_text())
    printed = "".join(
        "".join(output.get("text", ""))
        for cell in notebook["cells"]
        for output in cell.get("outputs", [])
    )
    where = "inside" if 18.4 <= round(mem0["measured"], 3) <= 22.2 else "outside"
    line = f"mem0 ({mem0['model']}): held-out error {mem0['measured']:.1f}%, {where} the study's"
    assert f"{line} 18.4–22.2%" in printed
    workloads = sorted(p.name for p in (executed / "serving" / "workloads").iterdir())
    assert "template_n40_l80_s0.parquet" in workloads


def test_metrics_hold_the_fit_break_even_and_missing_accuracy(executed):
    record = json.loads((executed / "metrics" / "06_serving_cost_study.json").read_text())
    metrics = record["metrics"]
    assert record["parameters"]["system_settings"] == {  # completed from the notebook's defaults
        "window": 10,
        "ingest_interval": 10,
        "mem0_top_k": 10,
        "om_top_k": 1,
        "observer_tokens": 1200,
        "reflector_tokens": 300,
        "temperature": 0.7,
        "max_output_tokens": 32768,
    }
    assert metrics["backend"] == "offline" and metrics["price_table_date"]
    full = next(r for r in metrics["table1"] if r["system"] == "full_history")
    assert 0.8 < full["p"] < 1.05 and 0.8 < full["q"] < 1.05 and full["r2"] > 0.99
    assert {r["system"] for r in metrics["break_even"]} == {
        "rolling_window",
        "mem0",
        "observational",
    }
    assert metrics["locomo_subset"] is None  # no LoCoMo data in this run: said, not invented
    cpa = pd.read_csv(executed / "serving" / "tables" / "cpa_40x80.csv")
    assert cpa["cpa_usd"].isna().all() and cpa["status"].str.startswith("missing").all()
    manifest = json.loads((executed / "manifest.json").read_text())
    assert manifest["steps"]["06_serving_cost_study"]["metrics"]["rows"] == metrics["rows"]


def test_the_runner_runs_notebook_06_only_when_a_preset_names_it():
    notebooks = discover_notebooks()
    assert "06" in notebooks and "06" not in default_steps(notebooks)
    assert load_preset("smoke").steps == []
    assert load_preset("serving_offline_full").steps == ["06"]
    assert load_preset("serving_smoke").steps == ["00", "06"]
    on_paper = load_preset("serving_paper").parameters
    assert on_paper["models"] == ["openai/gpt-oss-20b", "google/gemma-4-26b-a4b-it"]
    assert on_paper["reasoning_efforts"] == ["low", "medium"]
    assert on_paper["backend"] == "openrouter"
    full = load_preset("serving_offline_full").parameters
    assert [tuple(c) for c in full["grid"]] == list(study.GRID)
    assert full["seeds"] == study.SEEDS_PER_CELL
    gates = full["system_settings"]
    assert (gates["observer_tokens"], gates["reflector_tokens"]) == (30_000, 40_000)


def test_serving_paper_without_a_key_stops_before_anything_runs(tmp_path, monkeypatch):
    from memcost.llm import providers
    from memcost.run import PresetError
    from memcost_systems.hindsight_library import HindsightLibrary

    # the key is checked whether or not Hindsight's environment is set up here
    monkeypatch.setattr(HindsightLibrary, "check_available", classmethod(lambda cls: None))
    monkeypatch.delenv("OPENROUTER_API_KEY", raising=False)
    monkeypatch.setattr(providers, "DEFAULT_ENV_FILE", tmp_path / "no.env")
    with pytest.raises(PresetError, match="OPENROUTER_API_KEY"):
        run_preset("serving_paper", run_name=str(tmp_path / "run"), stream=False)
    assert not (tmp_path / "run").exists()


def test_serving_paper_without_hindsights_environment_says_how_to_set_it_up(tmp_path, monkeypatch):
    from memcost.run import PresetError

    monkeypatch.setenv("MEMCOST_HINDSIGHT_PYTHON", str(tmp_path / "no-python"))
    monkeypatch.setenv("OPENROUTER_API_KEY", "sk-test")
    with pytest.raises(
        PresetError, match=r"^parameter systems: memory system hindsight .*make setup-hindsight"
    ):
        run_preset("serving_paper", run_name=str(tmp_path / "run"), stream=False)
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
def test_serving_smoke_preset_end_to_end(tmp_path):
    run = run_preset("serving_smoke", run_name=str(tmp_path / "run"), stream=False)
    metrics = json.loads((run.root / "metrics" / "06_serving_cost_study.json").read_text())
    assert metrics["metrics"]["locomo_subset"]["conversations"]
    assert metrics["metrics"]["real"]["exponents"]


def test_the_report_of_a_serving_run_leads_with_the_serving_study(executed):
    from memcost.paths import RunPaths
    from memcost.run.report import render_markdown

    metrics = json.loads((executed / "metrics" / "06_serving_cost_study.json").read_text())
    full = next(r for r in metrics["metrics"]["table1"] if r["system"] == "full_history")
    text = render_markdown(RunPaths(executed))
    brief = text[text.index("## The answer in brief") : text.index("## The serving-cost study")]
    assert brief.index("**The serving study, this run**") < brief.index("**The paper's answer**")
    assert f"full history p = {full['p']:.2f}, q = {full['q']:.2f}" in brief
    assert "sustained break-even against full history at 40×80: mem0 " in brief
    section = text.split("## The serving-cost study (notebook 06)")[1].split("\n## ")[0]
    assert "*Total Recall at What Cost?*" in section
    assert "**Total Recall's Table 1 against its published ranges**" in section
    assert "Total Recall's Figure 2" in section
    # systems and quantities in words: no column names
    assert "| full history | R² of the fit |" in section and "full_history" not in section
    assert "| cell | mem0 | observational | rolling window |" in section
    assert "observational 0, mem0 82, hindsight 356)" in section  # the study's, in words
    assert "has not run" not in text  # no section for a notebook that did not run
    assert "## Table 3" not in text and "## Tables 4-5" not in text
    # and the runner's last lines say it in words, not only the bill
    from memcost.cli import result_lines

    lines = result_lines(RunPaths(executed))
    assert lines[0].startswith("The serving study, this run (offline stand-ins")
    assert "sustained break-even against full history at 40×80: mem0 " in lines[0]
    assert lines[-1] == "bill: $0.00 spent (no model was called)"


def test_the_price_banner_of_serving_smoke_uses_notebook_06s_own_prices():
    """The serving study's backbones and embedding model are in the price table (OpenRouter's
    listings): the banner printed before the run shows their prices, not "no price" warnings."""
    from memcost.run.checks import paid_models, price_lines
    from memcost.run.presets import resolve_preset
    from memcost.run.runner import discover_notebooks

    notebooks = discover_notebooks()
    banner = price_lines(
        paid_models(resolve_preset("serving_smoke", notebooks), notebooks, paid_only=False)
    )
    assert "no price" not in banner
    assert "openai/gpt-oss-20b: 0.03 / - / 0.14 (dated 2026-12-03)" in banner
    assert "google/gemma-4-26b-a4b-it: 0.06 / - / 0.33 (dated 2026-12-03)" in banner
    assert "perplexity/pplx-embed-v1-0.6b: 0.004 / - / 0 (dated 2026-12-03)" in banner
    override = resolve_preset(
        "smoke", notebooks, overrides={"price_overrides": {"gpt-5-mini-2025-08-07": 0}}
    )
    banner = price_lines(paid_models(override, notebooks, paid_only=False))
    # a bare 0 is free throughout, cached input too
    assert "gpt-5-mini-2025-08-07: 0 / 0 / 0 (dated 2025-09-15, from price_overrides)" in banner
