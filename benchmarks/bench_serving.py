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
from memcost.run import load_preset, run_preset
from memcost.serving import analysis, systems
from memcost.serving import replay as rp
from memcost.serving import workload as wl
from memcost.serving.systems import OfflineEngine, ServingConfig


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=None)
    parser.add_argument("--notebook", action="store_true")
    args = parser.parse_args()
    params = load_preset("serving_offline_full").parameters
    seeds = args.seeds or params["seeds"]
    config = ServingConfig(
        window=params["window"],
        ingest_interval=params["ingest_interval"],
        mem0_top_k=params["mem0_top_k"],
        om_top_k=params["om_top_k"],
        observer_tokens=params["observer_tokens"],
        reflector_tokens=params["reflector_tokens"],
    )
    pairs = [(m, e) for m in params["models"] for e in params["reasoning_efforts"]]
    runs = rp.plan_runs(
        params["grid"],
        list(range(seeds)),
        params["systems"],
        params["baseline_cells"],
        params["baseline_repeats"],
    )
    timings: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        for _, n, size, seed in sorted({r for r in runs}):
            wl.cached_workload(Path(tmp), n, size, seed)
        timings["workloads"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        rows = rp.replay_synthetic(
            runs,
            lambda n, size, s: wl.cached_workload(Path(tmp), n, size, s),
            OfflineEngine(),
            config,
        )
        timings["replay"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    rows = systems.price_rows(
        rp.with_models(rows, pairs),
        embedding_model="text-embedding-3-small",
        price_overrides=params.get("price_overrides") or _default_prices(),
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


def _default_prices() -> dict:
    import ast

    from memcost.params import notebook_parameters
    from memcost.paths import NOTEBOOKS_DIR

    info = notebook_parameters(NOTEBOOKS_DIR / "06_serving_cost_study.ipynb")["price_overrides"]
    return ast.literal_eval(info["default"])


if __name__ == "__main__":
    sys.exit(main())
