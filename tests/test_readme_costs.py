"""The README's preset hours and costs are the estimate's figures, as shipped and with
extraction and judging batched, so that they cannot drift from it; every paid preset fits its
own budget; and the estimate's batch figure is the interactive one with exactly the batched
stages halved."""

from __future__ import annotations

import re

import pytest

from memcost.cli import main, preset_estimate
from memcost.costs.estimate import bill, call_hours, chosen_total, summary_text
from memcost.paths import REPO_ROOT
from memcost.run.presets import resolve_preset
from memcost.run.runner import discover_notebooks

BATCHED = {"extract": "batch", "judge": "batch"}
ROW = re.compile(
    r"^\| `((?:paper|current)_\w+)` \|.*\| ~(\d+) h( \+ batches)? \| "
    r"~\$(\d+) \(budget \$(\d+)\) \| ~\$(\d+) \|$",
    re.M,
)
PAID = (
    "paper_locomo",
    "paper_longmemeval",
    "paper_personamem",
    "current_locomo",
    "current_longmemeval",
    "current_personamem",
)


def _estimate(name: str, execution: dict[str, str] | None = None):
    overrides = {"client": {"execution": execution}} if execution is not None else {}
    preset = resolve_preset(name, discover_notebooks(), overrides=overrides)
    return preset_estimate(preset)[0]


def test_the_readme_time_and_cost_columns_are_the_estimate():
    rows = {
        m[1]: (int(m[2]), bool(m[3]), int(m[4]), int(m[5]), int(m[6]))
        for m in ROW.finditer((REPO_ROOT / "README.md").read_text(encoding="utf-8"))
    }
    assert set(rows) == set(PAID)
    for name, written in rows.items():
        shipped = _estimate(name)
        preset = resolve_preset(name, discover_notebooks())
        batched = chosen_total(_estimate(name, BATCHED))
        assert batched is not None
        computed = (
            max(1, round(call_hours(shipped))),
            bool((shipped["execution"] == "batch").any()),
            round(bill(shipped)),
            round(preset.parameters["max_cost_usd"]),
            round(batched),
        )
        assert written == computed, (
            f"README's {name} row says {written}; the estimate gives {computed} (hours, batched, "
            f"cost, budget, batched cost: python -m memcost estimate --params {name} "
            "[-p 'client={execution: {extract: batch, judge: batch}}']): update the row"
        )


@pytest.mark.parametrize("name", PAID)
def test_every_paid_preset_fits_its_own_budget_and_names_each_stage_s_model(name, capsys):
    preset = resolve_preset(name, discover_notebooks())
    estimate = _estimate(name)
    # with room to spare: the judge's reasoning tokens are assumed, and a run that meets its
    # budget stops before it has finished (current_locomo's estimate was 93% of its budget)
    assert bill(estimate) <= 0.8 * preset.parameters["max_cost_usd"]
    assert main(["estimate", "--params", name]) == 0
    out = capsys.readouterr().out
    assert "would stop" not in out
    for row in estimate.itertuples():  # one line per system, stage and model, naming them
        assert re.search(rf"^  \S+ +.+? +{row.ledger_stage} +{re.escape(row.model)} +", out, re.M)


def test_over_budget_says_the_estimate_the_budget_and_the_cheapest_change_that_fits(capsys):
    assert main(["estimate", "--params", "current_locomo", "-p", "client={execution: {}}"]) == 0
    line = capsys.readouterr().out.strip().splitlines()[-1]
    interactive = bill(_estimate("current_locomo", {}))
    judge_batched = bill(_estimate("current_locomo", {"judge": "batch"}))
    assert line.startswith("this run would stop before its first paid call: ")
    assert f"the estimated bill ${interactive:,.2f} exceeds max_cost_usd $75.00" in line
    assert line.endswith(
        "Cheapest change that fits: batch the judge: -p 'client={execution: "
        f"{{judge: batch}}}}' (${judge_batched:,.2f})"
    )
    assert main(["estimate", "--params", "current_locomo", "-p", "max_cost_usd=5"]) == 0
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert "Cheapest change that fits: -p max_cost_usd=" in line  # nothing else fits $5


def test_batched_stages_cost_exactly_half_and_the_rest_is_unchanged():
    interactive = _estimate("paper_locomo")
    batched = _estimate("paper_locomo", BATCHED)
    assert list(interactive["usd"]) == list(batched["usd"])  # the all-interactive column
    for row in batched.itertuples():
        factor = 0.5 if row.ledger_stage in BATCHED else 1.0
        assert row.usd_execution == pytest.approx(row.usd * factor)
    judge = batched.loc[batched["ledger_stage"] == "judge"]
    assert len(judge) == 1 and judge["usd"].iloc[0] > 10  # the judge: most of the bill
    extract, update = (
        batched.loc[batched["ledger_stage"] == s].iloc[0] for s in ("extract", "update")
    )
    assert extract.usd_execution == pytest.approx(update.usd_execution / 2)  # update: interactive
    saved = float(batched["usd"].sum()) - chosen_total(batched)
    assert saved == pytest.approx((judge["usd"].iloc[0] + extract.usd) / 2)


def test_a_stage_without_a_batch_price_is_named_not_guessed():
    # GPT-OSS-120B (OpenRouter) has no batch interface in the price table
    estimate = _estimate("paper_locomo", {"long_context": "batch"})
    assert chosen_total(estimate) is None
    text = summary_text(estimate, max_cost_usd=None)
    assert "total, with execution {long_context: batch}: not known" in text
    assert (
        "locomo long_context: openai/gpt-oss-120b has no batch price in memcost.catalog; "
        "the estimate does not guess one"
    ) in text
    assert "n/a" in text


def test_flex_is_priced_like_batch_for_the_gpt5_judge():
    flex = chosen_total(_estimate("paper_locomo", {"judge": "flex"}))
    batch = chosen_total(_estimate("paper_locomo", {"judge": "batch"}))
    assert flex == pytest.approx(batch)


def test_the_estimate_command_prints_both_bills(capsys):
    assert (
        main(
            [
                "estimate",
                "--params",
                "paper_locomo",
                "-p",
                "client={execution: {extract: batch, judge: batch}}",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    interactive = float(_estimate("paper_locomo")["usd"].sum())
    batched = chosen_total(_estimate("paper_locomo", BATCHED))
    assert f"total, all interactive: ${interactive:,.2f}" in out
    assert f"total, with execution {{extract: batch, judge: batch}}: ${batched:,.2f}" in out
    assert "locomo: paper-scale counts (paper Tables 1-2: 10 conversations" in out
    assert (
        main(["estimate", "--params", "paper_locomo", "-p", "client={execution: {judging: batch}}"])
        == 2
    )
    assert "execution['judging']: unknown stage" in capsys.readouterr().err


@pytest.mark.slow
def test_the_serving_preset_fits_its_budget(tmp_path):
    """Notebook 06 prices its grid from an offline run of it (its estimate needs the token
    counts the run produces), so this one preset's bill is recomputed by running it offline.
    Without Hindsight: its offline replay of the grid through its server takes about 50
    minutes on two cores, more than every other slow test together."""
    import json

    from memcost.run import run_preset

    preset = resolve_preset("serving_paper", discover_notebooks())
    run_dir = tmp_path / "run"
    systems = [s for s in preset.parameters["systems"] if s != "hindsight"]
    run_preset(
        "serving_paper",
        run_name=str(run_dir),
        stream=False,
        overrides={"backend": "offline", "systems": systems},
    )
    metrics = json.loads((run_dir / "metrics" / "06_serving_cost_study.json").read_text())
    estimate = metrics["metrics"]["estimate_usd"]
    assert 0 < estimate <= preset.parameters["max_cost_usd"]
