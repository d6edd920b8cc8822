"""Benchmark of what a notebook costs before and after its cells: a kernel's start and end.

A run executes 17 notebooks, the test suite a few hundred; each starts a kernel, waits for it to
answer, runs its cells and shuts it down. This times a notebook of three trivial cells, so that
what is measured is only that overhead:

1. forked kernels (the runner's default once its fork server is warm), 20 notebooks;
2. fresh kernels (``MEMCOST_KERNEL_FORKS=0``), 5 notebooks.

It prints the median, the 90th percentile and the slowest, and how many kernels did not end at
their shutdown request and had to be sent SIGTERM (target: forked median under 0.5 s, none sent
SIGTERM). Run: ``.venv/bin/python benchmarks/bench_kernels.py``.
"""

from __future__ import annotations

import logging
import os
import statistics
import tempfile
import time
from pathlib import Path

import nbformat

from memcost.run import kernel_forks
from memcost.run.execute import execute_notebook

N_FORKED, N_FRESH = 20, 5
MEDIAN_TARGET_S = 0.5


class _Terminations(logging.Handler):
    """Counts jupyter_client's "taking too long ... terminating" (a SIGTERM was sent)."""

    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        self.count += "taking too long" in record.getMessage()


def _notebook(folder: Path) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("x = 1", metadata={"tags": ["parameters"]}),
        nbformat.v4.new_code_cell("y = x + 1"),
    ]
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    path = folder / "trivial.ipynb"
    path.write_text(nbformat.writes(nb), encoding="utf-8")
    return path


def _times(notebook: Path, n: int) -> list[float]:
    times = []
    for i in range(n):
        t0 = time.perf_counter()
        execute_notebook(notebook, notebook.with_name(f"out{i}.ipynb"), {"x": i}, False)
        times.append(time.perf_counter() - t0)
    return times


def _line(name: str, times: list[float]) -> str:
    ordered = sorted(times)
    p90 = ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]
    return (
        f"{name:<16} {len(times):>3} notebooks   median {statistics.median(times):.2f} s   "
        f"p90 {p90:.2f} s   slowest {ordered[-1]:.2f} s"
    )


def main() -> int:
    terminations = _Terminations()
    logger = logging.getLogger("traitlets")
    logger.addHandler(terminations)
    logger.setLevel(logging.DEBUG)
    with tempfile.TemporaryDirectory() as tmp:
        notebook = _notebook(Path(tmp))
        os.environ[kernel_forks.SWITCH] = "0"
        fresh = _times(notebook, N_FRESH)
        os.environ[kernel_forks.SWITCH] = "1"
        kernel_forks.expect_kernels(2)
        while not kernel_forks._SERVER.ready():  # the server imports once, before the timing
            time.sleep(0.05)
        forked = _times(notebook, N_FORKED)
    print(_line("forked kernels", forked))
    print(_line("fresh kernels", fresh))
    print(f"kernels sent SIGTERM after their shutdown request: {terminations.count}")
    median = statistics.median(forked)
    ok = median < MEDIAN_TARGET_S and terminations.count == 0
    print(
        f"target: forked median under {MEDIAN_TARGET_S} s and no SIGTERM: "
        f"{'met' if ok else 'NOT met'}"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
