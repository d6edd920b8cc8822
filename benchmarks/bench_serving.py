"""How long the serving-cost study takes offline on its whole grid (``serving_offline_full``).

Times, in this process and with the preset's own parameters:

- workloads: generate (or read from the cache) every conversation of the grid,
- replay: every run of every system, turn by turn, with the offline stand-ins,
- pricing and turn costs: dollars per row, one row per turn,
- fit: Table 1 (separable fit, 1,000 whole-run bootstrap resamples, leave-one-cell-out, the
  one-variable and memory-state models) and the break-even table,

then prints the baselines' fitted exponents, R² and LOOCV-MAPE next to the study's ranges.
``--notebook`` also runs the preset through the runner (papermill) and times it end to end.
Target on a 2-core machine: under a minute for the replay and the analysis.

    python benchmarks/bench_serving.py [--seeds 8] [--notebook]
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

from memcost import paper as published
from memcost.params import notebook_defaults
from memcost.run import load_preset, run_preset
from memcost.run.runner import study_notebooks
from memcost_serving import analysis, systems
from memcost_serving import replay as rp
from memcost_serving import workload as wl
from memcost_serving.systems import ServingConfig


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=None)
    parser.add_argument("--notebook", action="store_true")
    args = parser.parse_args()
    params = _parameters("serving_offline_full")
    seeds = args.seeds or params["seeds"]
    config = ServingConfig(**params["system_settings"])  # as notebook 06 builds it
    pairs = [(m, e) for m in params["models"] for e in params["reasoning_efforts"]]
    extra = params["extra_cells"]
    runs = rp.plan_runs(
        params["grid"],
        list(range(seeds)),
        params["systems"],
        extra["baselines"],
        extra["baseline_repeats"],
        observational_cells=extra["observational"],
        observational_repeats=extra["observational_repeats"],
    )
    timings: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        for _, n, size, seed in sorted(set(runs)):
            wl.cached_workload(Path(tmp), n, size, seed)
        timings["workloads"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        source = lambda n, size, s: wl.cached_workload(Path(tmp), n, size, s)  # noqa: E731
        rows = rp.replay_all(runs, source, config, pairs=pairs, offline=True)
        timings["replay"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    rows = systems.price_rows(
        rows,
        embedding_model=params["embedding_model"],
        price_overrides=params["price_overrides"],
    )
    turns = analysis.turn_costs(rows)
    timings["pricing + turn costs"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    first = turns[turns["model"] == pairs[0][0]]
    exponents = analysis.exponents_table(first, n_resamples=params["n_bootstrap"])
    table8 = analysis.break_even_table(analysis.cumulative_curves(turns))
    timings["fit + break-even"] = time.perf_counter() - t0
    print(
        f"{len(runs)} runs, {len(rows):,} stage rows, {len(turns):,} turns "
        f"({len(pairs)} model/effort pairs)"
    )
    for name, seconds in timings.items():
        print(f"  {name:<22} {seconds:7.2f} s")
    print(
        f"  {'total':<22} {sum(timings.values()):7.2f} s; peak memory "
        f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB"
    )
    versus = analysis.exponents_vs_published(exponents.assign(source="synthetic"))
    shown = versus[versus["published"] != ""][
        ["system", "quantity", "measured", "published", "inside"]
    ]
    pd.set_option("display.width", 140)
    print(f"\nTable 1 offline ({pairs[0][0]}), measured vs the study:")
    print(shown.round(3).to_string(index=False))
    print("\nbootstrap 95% intervals (whole runs):")
    print(
        exponents[
            [
                "system",
                "p",
                "p_low",
                "p_high",
                "q",
                "q_low",
                "q_high",
                "worst_ratio",
                "loocv_mape_state",
            ]
        ]
        .round(3)
        .to_string(index=False)
    )
    at = table8[(table8["cell"] == "400×200") & (table8["model"] == pairs[0][0])]
    print(
        f"\nbreak-even at 400×200: {dict(zip(at['system'], at['break_even'], strict=True))}; "
        f"study: {published.BREAK_EVEN_400_200}"
    )
    if args.notebook:
        with tempfile.TemporaryDirectory() as tmp:
            t0 = time.perf_counter()
            run_preset("serving_offline_full", run_name=str(Path(tmp) / "run"), stream=False)
            print(
                f"\nnotebook 06 with serving_offline_full via the runner: "
                f"{time.perf_counter() - t0:.1f} s"
            )
    return 0


def _parameters(preset: str) -> dict:
    """Notebook 06's parameters as the runner gives them: its defaults, then the preset's."""
    defaults = notebook_defaults(study_notebooks()["06"])
    return {**defaults, **load_preset(preset).parameters}


if __name__ == "__main__":
    sys.exit(main())
