"""A memory system published by someone else joins through its entry point alone: installed into
the test environment (tests/example_plugin), it is in the registry, the estimate and the report
of a smoke run, and nothing of this repository names it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

EXAMPLE = Path(__file__).parent / "example_plugin"


@pytest.mark.timeout(600)
def test_an_outside_memory_system_runs_through_the_smoke_preset(tmp_path):
    site = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
         "--target", str(site), str(EXAMPLE)],
        check=True,
    )  # fmt: skip
    path = [str(site), *filter(None, [os.environ.get("PYTHONPATH")])]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(path)}
    listed = subprocess.run(
        [sys.executable, "-c", "from memcost.memory import system_names; print(*system_names())"],
        env=env, capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    assert "recent_turns" in listed and listed[0] == "mem0_style"

    run = tmp_path / "run"
    done = subprocess.run(
        [sys.executable, "-m", "memcost", "run", "--params", "smoke", "--run-name", str(run),
         "--datasets", "locomo", "--steps", "00,01,02,04", "--quiet",
         "-p", "memory_systems=[mem0_style, recent_turns]", "-p", "judge_prompts=[judge]"],
        env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]

    estimate = pd.read_csv(run / "tables" / "estimate_before_run.csv")
    mine = estimate.loc[estimate["system"] == "memory_recent_turns"]
    assert set(mine["ledger_stage"]) >= {"read"}  # priced before the run, as every system
    answers = run / "locomo" / "answers" / "answers_memory_recent_turns.jsonl"
    records = [json.loads(line) for line in answers.read_text().splitlines()]
    questions = pd.read_parquet(run / "locomo" / "data" / "questions.parquet")
    assert len(records) == len(questions) and all(r["retrieved_tokens"] > 0 for r in records)
    table3 = pd.read_csv(run / "locomo" / "tables" / "table3_accuracy.csv")
    assert "memory_recent_turns" in set(table3["system"])
    report = (run / "report.md").read_text(encoding="utf-8")
    assert "| LoCoMo | memory recent_turns (offline) |" in report
