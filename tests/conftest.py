"""Shared fixtures.

Every test writes into its own temporary run directory. The notebooks are executed once per test
session: ``smoke_run`` is the smoke preset (all notebooks, all three bundled samples, offline),
and tests that need only notebook 00's files start from a copy of it (``prepared_run``) instead
of executing notebook 00 again. Under ``pytest -n`` (pytest-xdist) the workers share one smoke run:
the first to arrive executes it under a file lock, the others wait and read it.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from filelock import FileLock

from memcost.paths import RunPaths
from memcost.run import run_preset

# The tests run on a fixed "today" so that they do not change meaning when a model they name is
# shut down (the paper's GPT-5 models on 2026-12-11); the lifecycle tests set their own dates.
os.environ.setdefault("MEMCOST_TODAY", "2026-11-30")


@pytest.fixture
def run_paths(tmp_path) -> RunPaths:
    """A fresh, empty run directory under pytest's tmp_path."""
    return RunPaths(tmp_path / "run").ensure()


def _shared_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder every xdist worker of this session sees (pytest's base temp when not under xdist)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@pytest.fixture(scope="session")
def smoke_run(tmp_path_factory) -> RunPaths:
    """The smoke preset, executed once for the whole session. Read it, never write into it."""
    shared = _shared_folder(tmp_path_factory)
    root = shared / "smoke" / "run"
    finished = shared / "smoke" / "finished"
    with FileLock(str(shared / "smoke.lock")):
        if not finished.exists():
            shutil.rmtree(root, ignore_errors=True)
            run_preset("smoke", run_name=str(root), stream=False)
            finished.touch()
    return RunPaths(root)


@pytest.fixture
def prepared_run(smoke_run, tmp_path) -> Callable[[Sequence[str]], RunPaths]:
    """A new run directory holding notebook 00's files for the given datasets, copied from the
    smoke run, so a test can execute only the notebook it is about."""

    def make(datasets: Sequence[str] = ("locomo",)) -> RunPaths:
        run = RunPaths(tmp_path / "run").ensure()
        for name in datasets:
            shutil.copytree(smoke_run.dataset(name).data, run.dataset(name).data)
            run.dataset(name).ensure()
        return run

    return make
