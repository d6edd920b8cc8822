"""The verify_* presets: the paper's headline on a subset sized by a power calculation, within
a few dollars, drawn by category."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from memcost import data, paper
from memcost.catalog import successor_preset
from memcost.cli import main, preset_estimate, verify_plan
from memcost.costs.estimate import bill, call_hours
from memcost.data.benchmark import as_source
from memcost.data.sources import sample_path
from memcost.paths import PARAMS_DIR
from memcost.run.presets import resolve_preset
from memcost.run.runner import discover_notebooks
from memcost.stats import cluster_bootstrap_interval
from memcost.verify import MIN_CONVERSATIONS, detectable_gap, plan

VERIFY = {"verify_locomo": 5.0, "verify_longmemeval": 10.0, "verify_personamem": 5.0}


@pytest.mark.parametrize("name", [p.stem for p in sorted(PARAMS_DIR.glob("verify_*.yaml"))])
def test_each_verify_preset_draws_the_subset_the_power_calculation_sizes(name):
    preset = resolve_preset(name, discover_notebooks())
    sized = verify_plan(preset)
    p = preset.parameters
    assert (p["sample_conversations"], p["sample_questions"]) == (
        sized.conversations,
        sized.sampled,
    )
    assert p["sample_stratify"] is True and sized.conversations >= MIN_CONVERSATIONS
    # with room to spare, as every paid preset (test_readme_costs)
    assert bill(preset_estimate(preset)[0]) <= 0.8 * p["max_cost_usd"]


@pytest.mark.parametrize(("name", "budget"), VERIFY.items())
def test_the_verify_presets_cost_what_the_study_promises(name, budget, capsys):
    assert main(["estimate", "--params", name]) == 0
    out = capsys.readouterr().out
    total = bill(preset_estimate(resolve_preset(name, discover_notebooks()))[0])
    assert total <= budget and f"${total:,.2f}" in out
    assert "what this subset can show: " in out
    if name == "verify_locomo":
        estimate = preset_estimate(resolve_preset(name, discover_notebooks()))[0]
        assert call_hours(estimate) <= 1.0


def test_what_each_subset_can_and_cannot_show():
    flat = plan("locomo", lambda k, n: float(n))  # fewest questions
    assert flat.shows_paper_gap and flat.detectable <= flat.paper_gap
    assert "tells the paper's gap of 35.2 points from zero" in flat.describe()
    # A smaller subset would not: sized no larger than the gap needs.
    assert (
        detectable_gap(flat.judged - flat.per_conversation, flat.per_conversation, "locomo")
        > flat.paper_gap
        or flat.conversations == MIN_CONVERSATIONS
    )
    persona = plan("personamem", lambda k, n: float(n))
    assert not persona.shows_paper_gap
    assert "cannot confirm the paper's gap of 7.3 points" in persona.describe()
    whole = detectable_gap(paper.TABLE2["personamem"][0], 589 / 222, "personamem")
    assert whole > persona.paper_gap  # not even the whole split could


def test_the_sizing_has_its_power_under_the_cluster_bootstrap():
    """Simulated LoCoMo subsets at the planned size, each system right at the paper's rate: the
    report's interval for the gap excludes zero at least as often as the plan promises."""
    sized = plan("locomo", lambda k, n: float(n))
    rng = np.random.default_rng(0)
    p_lc, p_mem = (
        paper.TABLE3["locomo"][s] / 100 for s in ("long_context_gpt-5-mini", "memory_mem0_style")
    )
    clusters = np.repeat(np.arange(sized.conversations), sized.per_conversation).astype(str)
    excluded = 0
    for seed in range(200):
        gap = (rng.random(clusters.size) < p_lc).astype(float) - (rng.random(clusters.size) < p_mem)
        low, _ = cluster_bootstrap_interval(gap, clusters, n_resamples=400, seed=seed)
        excluded += low > 0
    assert excluded / 200 >= 0.8


def test_the_stratified_sample_keeps_category_shares_and_covers_the_conversations():
    loaded = data.load(as_source(sample_path("locomo"), "locomo"))
    every = Counter(loaded.questions["category_id"])
    n = len(loaded.questions) // 2
    chosen = data.select(loaded, sample_questions=n, stratify=True, seed=3)
    got = Counter(chosen.questions["category_id"])
    assert sum(got.values()) == n
    for category, count in every.items():  # each share within one question of exact
        assert abs(got[category] - n * count / len(loaded.questions)) < 1
    assert set(chosen.questions["conversation_id"]) == set(loaded.questions["conversation_id"])
    again = data.select(loaded, sample_questions=n, stratify=True, seed=3)
    assert again.questions["question_id"].tolist() == chosen.questions["question_id"].tolist()
    assert chosen.selection["stratify"] is True


def test_a_verify_preset_past_its_models_shutdown_names_the_successor_one():
    available = [p.stem for p in PARAMS_DIR.glob("*.yaml")]
    assert successor_preset("verify_locomo", available) == "verify_current_locomo"
    assert successor_preset("verify_current_locomo", available) is None
    assert successor_preset("paper_locomo", available) == "current_locomo"


def test_the_readme_table_of_the_verify_presets_is_theirs():
    from memcost.paths import REPO_ROOT

    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    for name in VERIFY:
        preset = resolve_preset(name, discover_notebooks())
        sized = verify_plan(preset)
        total = bill(preset_estimate(preset)[0])
        row = next(line for line in readme.splitlines() if line.startswith(f"| `{name}` |"))
        assert f"{sized.sampled} questions" in row and f"~${total:,.2f}" in row, row
        assert f"a gap of {100 * sized.detectable:.1f} points or more" in row, row
