"""Notebook 00 runs on every bundled sample and writes its tables; bad input writes nothing."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import yaml

from memcost import data
from memcost.paths import PARAMS_DIR, SAMPLE_DIR, RunPaths
from memcost.runner import (
    NotebookFailed,
    discover_notebooks,
    load_preset,
    run_preset,
    validate_preset,
)


def _preset(tmp_path, **parameters) -> str:
    path = tmp_path / "preset.yaml"
    path.write_text(yaml.safe_dump({
        "description": "notebook 00 test",
        "datasets": list(data.DATASETS),
        "steps": ["00"],
        "parameters": parameters,
    }), encoding="utf-8")
    return str(path)


def test_smoke_preset_keys_are_declared_by_notebook_00():
    preset = load_preset(PARAMS_DIR / "smoke.yaml")
    validate_preset(preset, discover_notebooks())
    assert preset.datasets == list(data.DATASETS)
    assert preset.parameters["download"] is False


def test_notebook_00_on_every_bundled_sample(tmp_path):
    run = run_preset(_preset(tmp_path), run_name=str(tmp_path / "run"), stream=False)
    manifest = json.loads(run.manifest.read_text(encoding="utf-8"))
    for dataset in data.DATASETS:
        ds = run.dataset(dataset)
        expected = data.prepare(data.load(data.resolve_source(dataset)))
        table1 = pd.read_csv(ds.tables / "table1_conversation_tokens.csv")
        table2 = pd.read_csv(ds.tables / "table2_question_tokens.csv")
        assert list(table1.columns) == list(data.TABLE_COLUMNS) == list(table2.columns)
        assert table1.iloc[0].tolist() == expected.table1.iloc[0].tolist()
        assert table2.iloc[0].tolist() == expected.table2.iloc[0].tolist()
        assert (ds.tables / "table1_conversation_tokens.md").is_file()
        assert (ds.figures / "conversation_tokens.png").is_file()
        questions = pd.read_parquet(ds.questions)
        assert questions["question_id"].tolist() == expected.data.questions[
            "question_id"].tolist()
        stats = pd.read_parquet(ds.data / "conversation_stats.parquet")
        assert (stats["history_tokens"] > stats["text_tokens"]).all()
        metrics = json.loads((ds.metrics / "00_prepare_data.json").read_text())
        assert metrics["metrics"]["n_questions"] == len(questions)
        assert metrics["parameters"]["dataset"] == dataset
        provenance = manifest["provenance"][dataset]
        assert provenance["origin"] == "sample"
        assert provenance["files"][0]["sha256"] == metrics["metrics"]["raw_sha256"]
        assert manifest["notebooks"][f"{dataset}/00_prepare_data"]["status"] == "ok"


def test_notebook_00_bad_input_fails_and_writes_nothing(tmp_path):
    broken = tmp_path / "locomo10.json"
    broken.write_text((SAMPLE_DIR / "locomo" / "locomo10.json").read_text()[:3000])
    with pytest.raises(NotebookFailed, match=r"DataError: .*locomo10\.json: not valid JSON"):
        run_preset(_preset(tmp_path, data_path=str(broken), limit_questions=3),
                   run_name=str(tmp_path / "run"), datasets=["locomo"], stream=False)
    ds = RunPaths(tmp_path / "run").dataset("locomo")
    assert not any(ds.data.iterdir()) and not any(ds.tables.iterdir())
    assert not (ds.metrics / "00_prepare_data.json").exists()
