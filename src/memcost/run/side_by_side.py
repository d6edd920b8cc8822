"""Notebooks side by side: an offline run starts each notebook as soon as those it reads have run.

Each dataset's notebooks (00, then 01-04) wait only for the ones before them that they read:
long context (03) reads nothing of the memory's (01, 02), so it runs beside them
(:data:`memcost.run.notebooks.READS_NOTHING_OF`); and each run-wide notebook of the cost study
(05 and 07 read only what the datasets' notebooks wrote) runs beside the other. With two cores,
two notebooks run at once, each in its own kernel. The order in which notebooks are taken up,
the estimate printed after every dataset's notebook 00, and the failure rules are the serial
run's: when a notebook fails or leaves more failed items than allowed, no other notebook
starts, the one running beside it finishes (its work is kept for the resume), and the run then
stops with the error the serial run would have given. Paid runs stay serial (one budget, one
account's rate limits), and so do runs that keep vectors in the run's PostgreSQL server
(started by whichever notebook needs it first) and runs that stream cell output to the
terminal (two notebooks' output would interleave). ``MEMCOST_DATASET_WORKERS=1`` runs
everything one after another.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Collection, Mapping, Sequence
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
        if name == "hindsight":
            return True  # the Hindsight server's database is the run's private PostgreSQL
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


class SideBySide:
    """Runs notebooks ``workers`` at a time. :meth:`run` takes the tasks in the serial run's
    order and, for each, the tasks it waits for; a free worker takes the first task whose
    prerequisites have run. ``run_one`` executes one ``(step, dataset)``, returns its stage
    status (``None`` when it has none) and raises what the serial runner raises;
    ``over_limit(status)`` says whether its failed items stop the run. :meth:`run` returns the
    statuses by task, or raises the first error once the running notebooks have ended."""

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
        self._ready = threading.Condition()

    def run(
        self, tasks: Sequence[Task], after: Mapping[Task, Collection[Task]] | None = None
    ) -> dict[Task, StageStatus]:
        pending = list(tasks)
        waits = {t: set((after or {}).get(t, ())) & set(pending) for t in pending}
        finished: set[Task] = set()
        running = 0  # tasks taken and not finished

        def take() -> Task | None:
            nonlocal running
            with self._ready:
                while not self.stop.is_set() and pending:
                    task = next((t for t in pending if waits[t] <= finished), None)
                    if task is not None:
                        pending.remove(task)
                        running += 1
                        return task
                    if not running:  # a cycle: nothing runs, nothing can start
                        cycle = RuntimeError(f"notebooks wait for each other: {pending}")
                        self.errors.append(cycle)
                        self.stop.set()
                        break
                    self._ready.wait(0.2)
                return None

        def worker() -> None:
            nonlocal running
            while (task := take()) is not None:
                self._one(task)
                with self._ready:
                    finished.add(task)
                    running -= 1
                    self._ready.notify_all()

        threads = [
            threading.Thread(target=worker, name=f"memcost-side-{i}", daemon=True)
            for i in range(min(self.workers, len(pending)))
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

    def _one(self, task: Task) -> None:
        try:
            status = self.run_one(*task)
        except BaseException as exc:  # noqa: BLE001 - raised again by run(), in order
            with self._ready:
                self.errors.append(exc)
            self.stop.set()  # a failed notebook stops the run, as it does serially
            return
        if status is not None:
            with self._ready:
                self._statuses[task] = status
            if self.over_limit(status):
                self.stop.set()  # as serially, the run goes no further than this step
