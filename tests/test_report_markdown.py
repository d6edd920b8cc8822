"""The report's table helpers."""

from __future__ import annotations

from memcost.run.report.markdown import merge_rows


def test_rows_that_differ_in_one_column_become_one():
    rows = [
        ["LoCoMo", "paper", "always", 24],
        ["LoCoMo", "paper", "in_memory", 2],
        ["LoCoMo", "paper", "extended", 2],
        ["LoCoMo", "current", "none", 2],
        ["LoCoMo", "paper", "none", 2],
    ]
    assert merge_rows(rows, column=2) == [
        ["LoCoMo", "paper", "always", 24],
        ["LoCoMo", "paper", "in_memory, extended, none", 2],
        ["LoCoMo", "current", "none", 2],
    ]
    assert rows[1][2] == "in_memory"  # the caller's rows are left as they were


def test_the_dates_are_called_invented_only_for_datasets_that_ran_on_a_bundled_sample(smoke_run):
    import dataclasses

    from memcost.run.report.costs import _invented_dates
    from memcost.run.report.view import RunView

    view = RunView.load(smoke_run)
    both = {"locomo", "longmemeval"}
    assert _invented_dates(view, both) == (
        " (invented dates on the bundled samples of LongMemEval, LoCoMo)"  # the run's order
    )
    # the same run had LoCoMo come from the real file: only LongMemEval's dates are invented
    view.datasets = [
        dataclasses.replace(d, provenance={**d.provenance, "origin": "local"})
        if d.name == "locomo"
        else d
        for d in view.datasets
    ]
    assert _invented_dates(view, both) == " (invented dates on the bundled samples of LongMemEval)"
    assert _invented_dates(view, {"locomo"}) == ""


def test_the_bill_names_the_stages_the_estimate_missed_each_way():
    # the explanation once read as if the estimate were always the higher
    import pandas as pd

    from memcost.run.report.headline import _stage_differences

    estimate = pd.DataFrame(
        {"ledger_stage": ["judge", "judge", "extract", "read"], "usd": [4.0, 2.58, 0.0034, 0.1]}
    )
    ledger = pd.DataFrame(
        {"stage": ["judge", "extract", "read", "embed"], "cost_usd": [0.517, 0.0107, 0.1, 0.0001]}
    )
    lower, higher = _stage_differences(estimate, ledger)
    assert lower == ["judge $6.58 estimated, $0.5170 in the ledger"]
    assert higher == ["extract $0.0034 estimated, $0.0107 in the ledger"]  # read, embed: equal


def test_the_bill_compares_the_ledger_with_the_estimate_in_the_modes_chosen(tmp_path):
    """A run that batched extraction and the judge was told its estimate was $26.15 (every stage
    interactive, the judge $20.10) against a ledger priced at the Batch API's half: the runner
    had printed $16.04 for the modes chosen, and the report's cost section said $16.04 too."""
    import pandas as pd

    from memcost.paths import RunPaths
    from memcost.run.report.headline import _bill
    from memcost.run.report.view import RunView

    run = RunPaths(tmp_path / "run")
    run.tables.mkdir(parents=True)
    pd.DataFrame({
        "dataset": "locomo", "ledger_stage": ["extract", "read", "judge"],
        "execution": ["batch", "interactive", "batch"], "usd": [0.14, 2.62, 20.10],
        "usd_execution": [0.07, 2.62, 10.05], "input_tokens": 1, "cached_input_tokens": 0,
    }).to_csv(run.table.estimate_before_run, index=False)  # fmt: skip
    pd.DataFrame({
        "dataset": "locomo", "component": ["write", "read", "judge", "locomo: total"],
        "spent_usd": [0.08, 0.69, 3.45, 4.22], "total_usd": [0.08, 0.69, 3.45, 4.22],
    }).to_csv(run.table.cost_summary, index=False)  # fmt: skip
    pd.DataFrame({
        "stage": ["extract", "read", "judge"], "cost_usd": [0.08, 0.69, 3.45],
        "cached_prompt_tokens": 0,
    }).to_csv(run.table.cost_by_stage, index=False)  # fmt: skip
    text = _bill(RunView(run=run, manifest={}, datasets=[]))
    assert text.startswith(
        "**The bill:** $4.22 paid; the ledger's calls at list price (Batch and Flex at their "
        "discount) come to $4.22; the estimate printed before the run was $12.74 in the "
        "execution modes chosen (judge $10.05 estimated, $3.45 in the ledger; "
    )
    assert "$22.86" not in text and "$20.10" not in text
    # a run without a discounted stage reads as before
    interactive = pd.read_csv(run.table.estimate_before_run).assign(execution="interactive")
    interactive.assign(usd_execution=interactive["usd"]).to_csv(
        run.table.estimate_before_run, index=False
    )
    text = _bill(RunView(run=run, manifest={}, datasets=[]))
    assert "the estimate printed before the run was $22.86 (judge $20.10 estimated" in text
    assert "discount" not in text and "modes chosen" not in text


def test_the_bill_says_when_a_stages_gap_is_the_prompt_cache_not_the_tokens():
    # An offline run of the real data: long context's prompts have no cache hits in the ledger,
    # while the estimate prices the cached share the prefix-cache rule predicts.
    import pandas as pd

    from memcost.run.report.headline import _cached_in_estimate_only

    estimate = pd.DataFrame(
        {
            "ledger_stage": ["long_context", "long_context", "judge"],
            "input_tokens": [40_000, 40_000, 9_000],
            "cached_input_tokens": [39_800, 0, 0],
        }
    )
    ledger = pd.DataFrame(
        {"stage": ["long_context", "judge"], "cached_prompt_tokens": [0, 0], "cost_usd": [1, 1]}
    )
    assert _cached_in_estimate_only(estimate, ledger) == [
        "49.8% of the estimate's input tokens in long context"
    ]
    ledger.loc[0, "cached_prompt_tokens"] = 30_000  # a provider that cached: the tokens' gap
    assert _cached_in_estimate_only(estimate, ledger) == []


def test_the_serving_section_sets_the_studys_model_beside_the_studys_numbers(tmp_path):
    """The study's break-even (400×200) is gpt-oss-20b's: the tables show that model's rows
    even when another backbone ran first, offline rows say they are the stand-ins' priced as
    it, and the cells follow the grid, not the strings' order."""
    import json

    from memcost.paths import RunPaths
    from memcost.run.report.view import RunView
    from memcost_serving.report import section_serving

    def row(model, cell, n_turns, mean_tokens, system, turn):
        return {"model": model, "cell": cell, "n_turns": n_turns, "mean_tokens": mean_tokens,
                "system": system, "break_even": turn}  # fmt: skip

    breaks = [
        row(model, cell, n, t, system, turn)
        for model, shift in (("google/gemma-4-26b-a4b-it", 100), ("openai/gpt-oss-20b", 0))
        for cell, n, t in (("15×200", 15, 200), ("15×50", 15, 50), ("100×100", 100, 100))
        for system, turn in (("mem0", 3 + shift), ("rolling_window", 11 + shift))
        if not (cell == "100×100" and system == "mem0")
    ]
    (tmp_path / "metrics").mkdir()
    (tmp_path / "metrics" / "06_serving_cost_study.json").write_text(
        json.dumps({"metrics": {"backend": "offline", "break_even": breaks}})
    )
    section = "\n".join(section_serving(RunView.load(RunPaths(tmp_path))))
    assert "(offline stand-ins priced as openai/gpt-oss-20b; turns," in section
    table = [line for line in section.splitlines() if line.startswith("| 1")]
    assert table == ["| 15×50 | 3 | 11 |", "| 15×200 | 3 | 11 |", "| 100×100 | — | 11 |"]


def test_table_2s_mean_has_one_decimal_as_the_papers_does(tmp_path):
    from memcost.paths import RunPaths
    from memcost.run.report.results import section_tokens
    from memcost.run.report.view import RunView

    ds = RunPaths(tmp_path).dataset("locomo").ensure()
    ds.table.table2.parent.mkdir(parents=True, exist_ok=True)
    ds.table.table2.write_text("dataset,n,min,max,median,mean\nLoCoMo,1986,4,28,11,12.0\n")
    ds.questions.parent.mkdir(parents=True, exist_ok=True)
    ds.questions.write_bytes(b"")  # notebook 00's hand-over: what makes it a dataset of the run
    text = "\n".join(section_tokens(RunView.load(RunPaths(tmp_path))))
    assert "| this run | LoCoMo | 1,986 | 4 | 28 | 11 | 12.0 |" in text
    assert "| the paper | LoCoMo | 1,986 | 4 | 28 | 11 | 12.0 |" in text


def test_a_preset_changed_on_the_command_line_is_not_reported_as_the_preset_alone(smoke_run):
    """`-p backend=openai` on the offline smoke preset: the report named the preset and its
    description ("Offline smoke run ...") and nowhere said what the command line changed."""
    from memcost.run.presets import resolve_preset
    from memcost.run.report.headline import section_headline
    from memcost.run.report.page import what_ran
    from memcost.run.report.view import RunView
    from memcost.run.runner import discover_notebooks

    typed = {"backend": "openai", "models": ["gpt-5-mini-2025-08-07"]}
    preset = resolve_preset("smoke", discover_notebooks(), overrides=typed).as_dict()
    assert preset["command_line"] == typed
    assert preset["parameters"]["backend"] == "openai"
    assert "command_line" not in resolve_preset("smoke", discover_notebooks()).as_dict()

    view = RunView.load(smoke_run)
    view.manifest["preset"] = {**view.manifest["preset"], "command_line": typed}
    brief = "\n".join(section_headline(view))
    assert (
        "**What ran:** preset `smoke` (Offline smoke run on the bundled samples of all three "
        'benchmarks) with `backend=openai`, `models=["gpt-5-mini-2025-08-07"]` from the command '
        "line, 17 notebook executions on "
    ) in brief
    rows = dict(what_ran(view))
    assert rows["preset"].endswith(
        '; from the command line: `backend=openai`, `models=["gpt-5-mini-2025-08-07"]`'
    )


def test_the_first_screen_gives_this_runs_break_even_with_either_constants(smoke_run):
    from memcost.run.report.headline import break_even_brief
    from memcost.run.report.view import RunView

    view = RunView.load(smoke_run)
    assert break_even_brief(view) == (
        "**This run's Tables 4-5** (notebook 05, the cost model of paper §3.5): 26 of 26 "
        "published cells reproduced to 4 decimals; memory is cheaper per user from question 13 "
        "at 30k, 10 at 100k, 9 at 200k, 9 at 500k tokens of history."
    )
    # with constants measured from the run's ledger, the cells are not the paper's to match
    view.manifest["steps"]["05_analyse_costs"]["parameters"]["cost_model"] = "measured"
    assert break_even_brief(view) == (
        "**This run's Table 5** (measured cost model): memory is cheaper per user from question "
        "13 at 30k, 10 at 100k, 9 at 200k, 9 at 500k tokens of history."
    )


def test_markup_from_a_preset_or_its_data_is_shown_in_the_page_never_run(smoke_run, tmp_path):
    """A preset description holding a script appeared raw in report.html, twice."""
    import json
    import shutil

    from memcost.cli import main

    run = tmp_path / "run"
    shutil.copytree(smoke_run.root, run)
    manifest = json.loads((run / "manifest.json").read_text())
    attack = '<script>alert("x")</script> <img src=x onerror=alert(1)> [go](javascript:alert(2))'
    manifest["preset"]["description"] = attack
    (run / "manifest.json").write_text(json.dumps(manifest))
    assert main(["report", str(run)]) == 0
    page = (run / "report.html").read_text()
    assert "<script" not in page and "<img src=x" not in page
    assert page.count("&lt;script&gt;alert") == 2  # the brief and the table of what ran
    assert "Content-Security-Policy" in page and "default-src 'none'" in page
    assert page.count("<img") == page.count('<img alt="') > 0  # the figures, embedded, stay
