"""Benchmark: the offline study end to end, notebook by notebook.

Runs notebooks 00-05 with the offline backend, the paper's two long-context models and the
rolling-window, no-context and oracle baselines, three judge votes, on

- a dataset file: ``--data PATH --dataset NAME`` (e.g. the real ``locomo10.json``); or
- generated data at LongMemEval-S scale: ``--scale longmemeval_s`` writes 500 users of about
  100,000 tokens, one question each, in LongMemEval's native schema with the repository's own
  sample generator (``--users`` / ``--tokens`` for a fraction of it);
- without either, the bundled sample of ``--dataset`` (what ``make bench`` runs).

For each notebook it prints the wall time, the peak memory of the kernels running while it ran
(their proportional set sizes summed, sampled every second: two notebooks side by side are
counted together) and, for the notebooks that
call models, the offline calls per second of each ledger stage. Targets (quiet 2-core machine):
the full LoCoMo study in at most 60 s, the LongMemEval-S-scale study in at most 10 minutes and
8 GB; a run of either size ends with its verdict and exits 1 when the target is missed.
``--memory-systems mem0_style,rag,graph,hierarchical,observational`` builds and reads every
memory system instead of the paper's alone; at LongMemEval-S scale its target is the same 8 GB
(the time is printed, not judged: the offline stand-ins embed every archived turn).
Run: ``.venv/bin/python benchmarks/bench_pipeline.py --scale longmemeval_s --users 50``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import threading
import time
from collections import Counter
from datetime import datetime
from pathlib import Path

import psutil
import yaml

from memcost.calls import read_calls
from memcost.paths import REPO_ROOT
from memcost.run import run_preset

STAGE_NOTEBOOK = {
    "extract": "01",
    "update": "01",
    "embed": "01",
    "read": "02",
    "long_context": "03",
    "judge": "04",
}
PARAMETERS = {
    "backend": "offline",
    "models": ["gpt-5-mini-2025-08-07", "openai/gpt-oss-120b"],
    "baseline_models": ["gpt-5-mini-2025-08-07"],
    "include_rolling_window": True,
    "include_no_context": True,
    "include_oracle": True,
    "n_votes": 3,
    "judge_prompts": ["judge"],
    "cost_model": "paper",
}


def generate_longmemeval(folder: Path, users: int, tokens: int) -> Path:
    sys.path.insert(0, str(REPO_ROOT / "scripts"))
    from samplegen.longmemeval import build_longmemeval_scaled

    path = folder / "longmemeval_s_cleaned.json"
    t0 = time.perf_counter()
    path.write_text(
        json.dumps(build_longmemeval_scaled(random.Random(0), users, tokens)), encoding="utf-8"
    )
    print(
        f"generated {users} users x ~{tokens:,} tokens: {path.stat().st_size / 1e6:,.0f} MB "
        f"in {time.perf_counter() - t0:.0f} s"
    )
    return path


class MemorySampler(threading.Thread):
    """The memory of this process's children (the fork server and the notebook kernels), over
    time: their proportional set sizes, so that the pages a forked kernel shares with the
    server (its imports) and with a kernel beside it count once, not once per process."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.samples: list[tuple[float, int]] = []
        self.done = threading.Event()

    def run(self) -> None:
        me = psutil.Process()
        # once a second: reading a process's PSS walks its pages (about 15 ms for 500 MB), and a
        # sampler that reads gigabytes five times a second takes a core from the run it measures
        while not self.done.wait(1.0):
            rss = 0
            for child in me.children(recursive=True):
                try:
                    rss += child.memory_full_info().pss
                except psutil.Error:
                    pass
            self.samples.append((time.time(), rss))

    def peak(self, start: float, end: float) -> int:
        return max((r for t, r in self.samples if start <= t <= end), default=0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, help="a dataset file (with --dataset)")
    parser.add_argument("--dataset", default="locomo")
    parser.add_argument("--scale", choices=["longmemeval_s"])
    parser.add_argument("--users", type=int, default=500)
    parser.add_argument("--tokens", type=int, default=100_000)
    parser.add_argument(
        "--memory-systems",
        default="mem0_style",
        help="the memory systems notebooks 01-02 build and read, comma-separated",
    )
    parser.add_argument(
        "--keep",
        type=Path,
        help="write the data and the run here, and keep "
        "them (to read the executed notebooks' cell times)",
    )
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        if args.scale:
            args.dataset = "longmemeval"
            args.data = generate_longmemeval(folder, args.users, args.tokens)
        if args.data is None:  # `make bench`: the bundled sample, a check that it all runs
            from memcost.data.sources import sample_path

            args.data = sample_path(args.dataset)
            print(f"no --data or --scale: the bundled {args.dataset} sample ({args.data})")
        preset = folder / "bench.yaml"
        preset.write_text(
            yaml.safe_dump(
                {
                    "description": "bench_pipeline",
                    "datasets": [args.dataset],
                    "steps": ["00", "01", "02", "03", "04", "05"],
                    "parameters": {
                        **PARAMETERS,
                        "data_path": str(args.data.resolve()),
                        "memory_systems": args.memory_systems.split(","),
                    },
                }
            ),
            encoding="utf-8",
        )
        print(
            f"load: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} (1 and 5 min), "
            f"{os.cpu_count()} cores"
        )
        sampler = MemorySampler()
        sampler.start()
        t0 = time.perf_counter()
        run_preset(str(preset), run_name=str(folder / "run"), stream=False)
        total = time.perf_counter() - t0
        sampler.done.set()
        peak = report(folder / "run", sampler, total)
    return verdict(args, total, peak)


def verdict(args: argparse.Namespace, total: float, peak_gb: float) -> int:
    """The targets of the docstring, for the runs they are set for (exit 1 when one is missed)."""
    if args.scale and (args.users, args.tokens) == (500, 100_000):
        if args.memory_systems != "mem0_style":
            met = peak_gb <= 8
            print(
                f"target (LongMemEval-S scale, {args.memory_systems}): <= 8 GB: "
                f"{'met' if met else 'MISSED'}"
            )
            return 0 if met else 1
        met = total <= 600 and peak_gb <= 8
        print(f"target (LongMemEval-S scale): <= 600 s and <= 8 GB: {'met' if met else 'MISSED'}")
    elif args.dataset == "locomo" and args.data is not None and args.data.name == "locomo10.json":
        met = total <= 60
        print(f"target (the full LoCoMo study): <= 60 s: {'met' if met else 'MISSED'}")
    else:
        return 0  # a fraction or a sample: no target
    return 0 if met else 1


def report(run: Path, sampler: MemorySampler, total: float) -> float:
    """Prints each notebook's time, memory and call rates; returns the peak memory in GB."""
    manifest = json.loads((run / "manifest.json").read_text(encoding="utf-8"))
    stages = Counter(record["stage"] for record in read_calls(run))
    print(f"{'notebook':<34} {'wall s':>8} {'peak PSS':>9}  calls per second")
    for name, entry in manifest["notebooks"].items():
        end = datetime.fromisoformat(entry["finished_at"]).timestamp()
        wall = float(entry["wall_time_s"])
        step = name.rsplit("/", 1)[-1][:2]
        rates = ", ".join(
            f"{s} {n / wall:,.0f}/s ({n:,})"
            for s, n in sorted(stages.items())
            if STAGE_NOTEBOOK.get(s) == step
        )
        peak = sampler.peak(end - wall - 1, end + 1) / 2**20
        print(f"{name:<34} {wall:>8.1f} {peak:>7,.0f} MB  {rates}")
    peak_gb = max((r for _, r in sampler.samples), default=0) / 2**30
    print(
        f"total: {total:.1f} s wall, peak memory of the notebooks' processes {peak_gb:.2f} GB (PSS)"
    )
    return peak_gb


if __name__ == "__main__":
    sys.exit(main())
