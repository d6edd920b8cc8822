"""Notebook 00 runs on every bundled sample and writes its tables; bad input writes nothing.

The notebook is executed once per test session (the smoke run, over the three samples, with the
notebook's default parameters for notebook 00); the tests read that run's files and its executed
copy.
"""

from __future__ import annotations

import json

import nbformat
import pandas as pd
import pytest
import yaml

from memcost import data
from memcost.data.prepare import TABLE_COLUMNS, Prepared
from memcost.paths import PAPER_DATASETS, PARAMS_DIR, SAMPLE_DIR, RunPaths
from memcost.run import NotebookFailed, discover_notebooks, load_preset, run_preset
from memcost.run.presets import validate_preset


def _preset(folder, **parameters) -> str:
    path = folder / "preset.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "description": "notebook 00 test",
                "datasets": list(PAPER_DATASETS),
                "steps": ["00"],
                "parameters": parameters,
            }
        ),
        encoding="utf-8",
    )
    return str(path)


@pytest.fixture(scope="module")
def run(smoke_run) -> RunPaths:
    """Notebook 00 as the session's smoke run executed it, on each bundled sample."""
    return smoke_run


@pytest.fixture(scope="module")
def expected() -> dict[str, Prepared]:
    return {name: data.prepare(data.load(data.resolve_source(name))) for name in PAPER_DATASETS}


def _cell_text(notebook: nbformat.NotebookNode, cell_id: str) -> str:
    """Everything a code cell printed or displayed as text."""
    cell = next(c for c in notebook.cells if c.get("id") == cell_id)
    parts = []
    for output in cell.outputs:
        parts.append(output.get("text", ""))
        parts.append(output.get("data", {}).get("text/plain", ""))
    return "".join(parts)


def test_smoke_preset_keys_are_declared_by_notebook_00():
    preset = load_preset(PARAMS_DIR / "smoke.yaml")
    validate_preset(preset, discover_notebooks())
    assert preset.datasets == list(PAPER_DATASETS)
    assert preset.parameters["download"] is False


@pytest.mark.parametrize("dataset", PAPER_DATASETS)
def test_tables_match_the_library(run, expected, dataset):
    ds = run.dataset(dataset)
    table1 = pd.read_csv(ds.tables / "table1_conversation_tokens.csv")
    table2 = pd.read_csv(ds.tables / "table2_question_tokens.csv")
    assert list(table1.columns) == list(TABLE_COLUMNS) == list(table2.columns)
    assert table1.iloc[0].tolist() == expected[dataset].table1.iloc[0].tolist()
    assert table2.iloc[0].tolist() == expected[dataset].table2.iloc[0].tolist()
    assert (ds.tables / "table1_conversation_tokens.md").is_file()
    assert (ds.figures / "conversation_tokens.png").is_file()


@pytest.mark.parametrize("dataset", PAPER_DATASETS)
def test_hand_over_files_metrics_and_provenance(run, expected, dataset):
    ds = run.dataset(dataset)
    manifest = json.loads(run.manifest.read_text(encoding="utf-8"))
    questions = pd.read_parquet(ds.questions)
    assert (
        questions["question_id"].tolist()
        == expected[dataset].data.questions["question_id"].tolist()
    )
    stats = pd.read_parquet(ds.data / "conversation_stats.parquet")
    assert (stats["history_tokens"] > stats["text_tokens"]).all()
    metrics = json.loads((ds.metrics / "00_prepare_data.json").read_text())
    assert metrics["metrics"]["n_questions"] == len(questions)
    assert metrics["parameters"]["dataset"] == dataset
    provenance = manifest["provenance"][dataset]
    assert provenance["origin"] == "sample"
    assert provenance["files"][0]["sha256"] == metrics["metrics"]["raw_sha256"]
    assert manifest["notebooks"][f"{dataset}/00_prepare_data"]["status"] == "ok"


@pytest.mark.parametrize("dataset", PAPER_DATASETS)
def test_one_conversation_is_walked_through_before_the_batch(run, dataset):
    ds = run.dataset(dataset)
    executed = nbformat.read(ds.notebooks / "00_prepare_data.ipynb", as_version=4)
    order = [c.get("id") for c in executed.cells]
    assert order.index("walk-07") < order.index("cell-13")  # step by step, then the batch
    stats = pd.read_parquet(ds.data / "conversation_stats.parquet").iloc[0]
    conversations = pd.read_parquet(ds.conversations)
    example = conversations[conversations["conversation_id"] == stats["conversation_id"]]
    raw = _cell_text(executed, "walk-01")
    assert str(stats["conversation_id"]) in raw
    assert example["text"].iloc[0][:40] in _cell_text(executed, "walk-03")
    history = data.render_history(example)
    assert "\n".join(history.splitlines()[:3]) in _cell_text(executed, "walk-05")
    counts = _cell_text(executed, "walk-07")
    assert f"Table 1 text: {stats['text_tokens']:,} tokens" in counts
    assert f"rendered history: {stats['history_tokens']:,} tokens" in counts


def test_notebook_00_bad_input_fails_and_writes_nothing(tmp_path):
    broken = tmp_path / "locomo10.json"
    broken.write_text((SAMPLE_DIR / "locomo" / "locomo10.json").read_text()[:3000])
    with pytest.raises(NotebookFailed, match=r"DataError: .*locomo10\.json: not valid JSON"):
        run_preset(
            _preset(tmp_path, data_path=str(broken), limit_questions=3),
            run_name=str(tmp_path / "run"),
            datasets=["locomo"],
            stream=False,
        )
    ds = RunPaths(tmp_path / "run").dataset("locomo")
    assert not any(ds.data.iterdir()) and not any(ds.tables.iterdir())
    assert not (ds.metrics / "00_prepare_data.json").exists()
