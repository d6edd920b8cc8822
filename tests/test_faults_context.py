"""A prompt too large for its model is found right after notebook 00, before any paid stage,
with the table of what does not fit; overflow: truncate_oldest lets the run go on."""

from __future__ import annotations

import pytest

from memcost.cli import main
from memcost.paths import RunPaths

MODEL = "gpt-5-mini-2025-08-07"
SMALL = f'generation={{"{MODEL}": {{"max_output_tokens": 399000}}}}'  # leaves ~1,000 tokens


@pytest.mark.timeout(120)
def test_an_oversized_prompt_stops_after_notebook_00(tmp_path, capsys):
    run = RunPaths(tmp_path / "run")
    code = main(
        [
            "run",
            "--params",
            "smoke",
            "--run-name",
            str(run.root),
            "--datasets",
            "locomo",
            "--steps",
            "00,01,02,03",
            "--quiet",
            "-p",
            f"models=[{MODEL}]",
            "-p",
            "include_no_context=false",
            "-p",
            "include_oracle=false",
            "-p",
            SMALL,
        ]
    )
    out = capsys.readouterr()
    assert code == 2, out.err[-2000:]
    assert "do not fit their model's context window" in out.err
    assert "Found after notebook 00, before anything was paid for" in out.err
    assert "largest_prompt" in out.err and "over_limit" in out.err  # the table
    assert run.dataset("locomo").questions.is_file()  # 00 ran
    assert not (run.dataset("locomo").memory / "facts.parquet").exists()  # 01 did not
    assert not run.calls.exists()
