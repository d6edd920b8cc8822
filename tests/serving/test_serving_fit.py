"""The serving cost models: recovery of known exponents, leave-one-cell-out, whole-run bootstrap."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from memcost_serving import analysis as fit

CELLS = [(15, 50), (15, 200), (100, 100), (400, 50), (400, 200)]


def synthetic_turns(
    p: float,
    q: float,
    *,
    seeds: int = 4,
    noise: float = 0.05,
    run_effect: float = 0.0,
    seed: int = 0,
    a: float = 1.0,
) -> pd.DataFrame:
    """Turn costs drawn from log(C+1) = a + p·log(L+1) + q·log(t+1) + run effect + noise."""
    rng = np.random.default_rng(seed)
    rows = []
    for n, size in CELLS:
        for s in range(seeds):
            shift = rng.normal(0, run_effect)
            t = np.arange(n)
            log_c = a + p * np.log(size + 1) + q * np.log(t + 1) + shift + rng.normal(0, noise, n)
            rows.append(
                pd.DataFrame(
                    {
                        "cell": f"{n}×{size}",
                        "n_turns": n,
                        "mean_tokens": size,
                        "turn": t,
                        "C": np.expm1(log_c),
                        "run": f"{n}-{size}-{s}",
                        "gate_fired": False,
                        "pending_tokens": 0,
                        "memory_tokens": 0,
                        "memory_items": 0,
                    }
                )
            )
    return pd.concat(rows, ignore_index=True)


def test_fit_recovers_known_exponents_from_noisy_costs():
    turns = synthetic_turns(0.96, 0.95, noise=0.05)
    fitted = fit.fit(turns)
    assert fitted.p == pytest.approx(0.96, abs=0.02)
    assert fitted.q == pytest.approx(0.95, abs=0.02)
    assert fitted.a == pytest.approx(1.0, abs=0.15)
    assert fitted.r2 > 0.99
    flat = fit.fit(synthetic_turns(0.88, 0.11, noise=0.05, seed=3))
    assert (round(flat.p, 1), round(flat.q, 2)) == (0.9, 0.11)


def test_loocv_holds_out_whole_cells(monkeypatch):
    turns = synthetic_turns(1.0, 1.0)
    seen: list[set[str]] = []
    real_fit = fit.fit

    def spying_fit(frame, model="separable"):
        seen.append(set(frame["cell"]))
        return real_fit(frame, model)

    monkeypatch.setattr(fit, "fit", spying_fit)
    errors = fit.loocv(turns)
    all_cells = {f"{n}×{s}" for n, s in CELLS}
    assert list(errors["cell"]) == sorted(all_cells)
    # each refit saw every cell but exactly the held-out one, and all of its turns are gone
    assert [all_cells - s for s in seen] == [{c} for c in errors["cell"]]
    # predicting a cell's mean cost from the others: small error for exact power-law data
    assert errors["ape"].max() < 5
    assert fit.loocv(turns[turns["cell"] == "15×50"]).empty


def test_loocv_error_is_large_when_a_cell_breaks_the_law():
    turns = synthetic_turns(1.0, 1.0)
    spike = turns["cell"] == "100×100"
    turns.loc[spike, "C"] *= 3  # one cell three times dearer than the law says
    errors = fit.loocv(turns).set_index("cell")
    assert errors.loc["100×100", "ratio"] == pytest.approx(3, rel=0.15)
    assert errors.loc["100×100", "ape"] > 60


def test_bootstrap_resamples_whole_runs_and_turn_resampling_is_too_narrow():
    # every run has its own level (shared by all its turns): turns are not independent
    turns = synthetic_turns(0.9, 0.5, seeds=3, noise=0.02, run_effect=0.3, seed=7)
    by_run = fit.bootstrap(turns, n_resamples=400, seed=1, unit="run")
    by_turn = fit.bootstrap(turns, n_resamples=400, seed=1, unit="turn")
    run_low, run_high = fit.interval(by_run[:, 1])
    turn_low, turn_high = fit.interval(by_turn[:, 1])
    assert run_low < 0.9 < run_high
    assert (run_high - run_low) > 3 * (turn_high - turn_low)
    # a resample draws runs: with one run per group every draw is that run, so no spread
    one = turns[turns["run"].isin(["15-50-0", "400-200-0"])]
    same = fit.bootstrap(one.assign(run="only"), n_resamples=20, unit="run")
    assert np.ptp(same, axis=0).max() < 1e-9


def test_total_content_model_cannot_separate_depth_from_turn_length():
    turns = synthetic_turns(0.9, 0.1, noise=0.02)
    assert fit.fit(turns, "total").r2 < 0.6 < fit.fit(turns, "separable").r2
    with pytest.raises(ValueError, match="unknown cost model"):
        fit.design(turns, "quadratic")


def test_exponents_table_has_one_row_per_group_with_intervals():
    turns = synthetic_turns(0.96, 0.95).assign(
        system="full_history", model="m", reasoning_effort="low"
    )
    table = fit.exponents_table(turns, n_resamples=50)
    row = table.iloc[0]
    assert len(table) == 1 and row["runs"] == 20 and row["cells"] == 5
    assert row["p_low"] <= row["p"] <= row["p_high"] and row["q_low"] <= row["q"] <= row["q_high"]
    assert row["loocv_mape"] < 5 and row["worst_ratio"] >= 1
