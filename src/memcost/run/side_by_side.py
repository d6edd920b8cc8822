"""Notebooks side by side: an offline run's datasets share nothing until the run-wide notebooks.

Each dataset's notebooks (00, then 01-04) are a chain of their own, and so is each run-wide
notebook of the cost study (05 and 07 read only what the datasets' notebooks wrote); with two
cores, two chains run at once, each notebook in its own kernel. The order within a dataset, the
estimate printed after every dataset's notebook 00, and the failure rules are the serial run's:
when a notebook fails or leaves more failed items than allowed, no other notebook starts, the
one running beside it finishes (its work is kept for the resume), and the run then stops with
the error the serial run would have given. Paid runs stay serial (one budget, one account's rate
limits), and so do runs that keep vectors in the run's PostgreSQL server (started by whichever
notebook needs it first) and runs that stream cell output to the terminal (two notebooks'
output would interleave). ``MEMCOST_DATASET_WORKERS=1`` runs everything one after another.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from memcost.run.preflight import uses_paid_backend
from memcost.run.presets import Preset
from memcost.run.status import StageStatus

SWITCH = "MEMCOST_DATASET_WORKERS"


def _uses_pgvector(params: Mapping[str, Any]) -> bool:
    if params.get("vector_store") == "pgvector":
        return True
    for entry in params.get("memory_systems") or []:
        name, settings = next(iter(entry.items())) if isinstance(entry, Mapping) else (entry, {})
        if name == "mem0" and (settings or {}).get("vector_store", "pgvector") == "pgvector":
            return True  # the mem0 library keeps its memories in pgvector by default
    return False


def dataset_workers(preset: Preset, *, verbose: bool) -> int:
    """How many notebooks run at once (1: one after another): one per core, unless the run
    must stay serial (see above) or ``MEMCOST_DATASET_WORKERS`` says how many."""
    wanted = os.environ.get(SWITCH, "").strip()
    limit = int(wanted) if wanted.isdigit() and int(wanted) > 0 else (os.cpu_count() or 1)
    params = [preset.parameters_for(d) for d in preset.datasets] or [preset.parameters]
    if verbose or any(uses_paid_backend(p) or _uses_pgvector(p) for p in params):
        return 1
    return max(1, limit)


Task = tuple[str, "str | None"]  # (step, dataset): one notebook execution


class Chains:
    """Runs chains of notebooks, ``workers`` chains at once: each chain a list of ``(step,
    dataset)`` executed in order by ``run_one``, which returns the stage status (``None`` when
    it has none) and raises what the serial runner raises; ``over_limit(status)`` says whether
    its failed items stop the chain. :meth:`run` returns the statuses by task, or raises the
    first error once the running notebooks have ended."""

    def __init__(
        self,
        run_one: Callable[[str, str | None], StageStatus | None],
        over_limit: Callable[[StageStatus], bool],
        workers: int,
    ):
        self.run_one, self.over_limit, self.workers = run_one, over_limit, workers
        self.stop = threading.Event()
        self.errors: list[BaseException] = []
        self._statuses: dict[Task, StageStatus] = {}
        self._lock = threading.Lock()

    def run(self, chains: Sequence[Sequence[Task]]) -> dict[Task, StageStatus]:
        queue = [list(c) for c in chains if c]

        def worker() -> None:
            while not self.stop.is_set():
                with self._lock:
                    if not queue:
                        return
                    chain = queue.pop(0)
                self._chain(chain)

        threads = [
            threading.Thread(target=worker, name=f"memcost-chain-{i}", daemon=True)
            for i in range(min(self.workers, len(queue)))
        ]
        for thread in threads:
            thread.start()
        try:
            for thread in threads:
                while thread.is_alive():
                    thread.join(0.2)  # a short wait, so that Ctrl-C reaches this thread
        except BaseException:
            self.stop.set()  # interrupted: no notebook starts; the caller stops the kernels
            raise
        if self.errors:
            raise self.errors[0]
        return dict(self._statuses)

    def _chain(self, chain: Sequence[Task]) -> None:
        for step, dataset in chain:
            if self.stop.is_set():
                return
            try:
                status = self.run_one(step, dataset)
            except BaseException as exc:  # noqa: BLE001 - raised again by run(), in order
                with self._lock:
                    self.errors.append(exc)
                self.stop.set()  # a failed notebook stops the run, as it does serially
                return
            if status is not None:
                with self._lock:
                    self._statuses[(step, dataset)] = status
                if self.over_limit(status):
                    self.stop.set()  # as serially, the run goes no further than this step
                    return
