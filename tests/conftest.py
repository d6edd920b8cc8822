"""Shared fixtures.

Every test writes into its own temporary run directory. The notebooks are executed once per test
session: ``smoke_run`` is the smoke preset (all notebooks, all three bundled samples, offline),
and tests that need only notebook 00's files start from a copy of it (``prepared_run``) instead
of executing notebook 00 again.

The smoke run starts as soon as the session does, when a selected test reads it: in the
background, as ``python -m memcost run`` (what a user types), while the tests that do not need
it run. Under ``pytest -n`` (pytest-xdist) the workers share it: the first to arrive starts it
under a file lock, every reader waits for its exit code.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest
from fake_api.openai_server import FakeOpenAIServer
from filelock import FileLock
from llm_helpers import TEST_KEY

from memcost.paths import REPO_ROOT, RunPaths

# The tests run on a fixed "today" so that they do not change meaning when a model they name is
# shut down (the paper's GPT-5 models on 2026-12-11); the lifecycle tests set their own dates.
os.environ.setdefault("MEMCOST_TODAY", "2026-11-30")


@pytest.fixture(autouse=True)
def _no_downloads_on_this_machine(monkeypatch):
    """What a test estimates does not depend on the datasets a developer has downloaded into
    data/raw/ (the estimate counts a download it finds there)."""
    monkeypatch.setattr("memcost.data.sources.RAW_DIR", REPO_ROOT / "tests" / "no-downloads")


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    """A local OpenAI-compatible server that accepts ``llm_helpers.TEST_KEY``."""
    with FakeOpenAIServer(api_key=TEST_KEY) as srv:
        yield srv


@pytest.fixture
def library_upstream(monkeypatch) -> Iterator[FakeOpenAIServer]:
    """The local server as the provider of a memory library's calls (tests/library_helpers.py),
    answering every library's prompts, with a planted key that must reach no file."""
    from fake_api.stages import stage_server
    from library_helpers import PLANTED

    monkeypatch.setenv("OPENAI_API_KEY", PLANTED)
    with stage_server(api_key=PLANTED, faults=False) as upstream:
        yield upstream


@pytest.fixture
def run_paths(tmp_path) -> RunPaths:
    """A fresh, empty run directory under pytest's tmp_path."""
    return RunPaths(tmp_path / "run").ensure()


def _shared_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder every xdist worker of this session sees (pytest's base temp outside xdist)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


SMOKE_WAIT_S = 800  # under the tests' 900 s hang guard: a stuck smoke run fails with its log
_BACKGROUND: list[subprocess.Popen] = []  # smoke runs this process started


def _smoke_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _shared_folder(tmp_path_factory) / "smoke"


def _start_smoke(folder: Path) -> subprocess.Popen | None:
    """Start the smoke run in the background, unless a process of this session already has. The
    run writes ``folder/run``, its output ``folder/run.log`` and, when it ends, ``exit_code``."""
    folder.mkdir(parents=True, exist_ok=True)
    with FileLock(f"{folder}.lock"):
        if (folder / "started").exists():
            return None
        (folder / "started").touch()
        command = [
            sys.executable,
            "-m",
            "memcost",
            "run",
            "--params",
            "smoke",
            "--quiet",
            "--run-name",
            str(folder / "run"),
        ]
        script = (
            'f=$1; shift; "$@" > "$f/run.log" 2>&1; '
            'echo $? > "$f/code" && mv "$f/code" "$f/exit_code"'
        )
        process = subprocess.Popen(
            ["sh", "-c", script, "sh", str(folder), *command], cwd=REPO_ROOT, start_new_session=True
        )
    _BACKGROUND.append(process)
    return process


def _stop_background() -> None:
    for process in _BACKGROUND:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def pytest_keyboard_interrupt(excinfo) -> None:
    _stop_background()


@pytest.fixture(scope="session", autouse=True)
def _smoke_starts_early(request, tmp_path_factory) -> Iterator[None]:
    """The smoke run starts with the session when a selected test reads it. At the end this
    process waits for a run it started (another worker may still read it), or stops it when the
    session is stopping early."""
    if any("smoke_run" in item.fixturenames for item in request.session.items):
        _start_smoke(_smoke_folder(tmp_path_factory))
    yield
    session = request.session
    for process in _BACKGROUND:
        if not (session.shouldstop or session.shouldfail):
            try:
                process.wait(timeout=SMOKE_WAIT_S)
            except subprocess.TimeoutExpired:
                pass
    _stop_background()


@pytest.fixture(scope="session")
def smoke_run(tmp_path_factory) -> RunPaths:
    """The smoke preset, executed once for the whole session. Read it, never write into it."""
    folder = _smoke_folder(tmp_path_factory)
    _start_smoke(folder)  # when no test of the session's selection asked for it up front
    deadline = time.monotonic() + SMOKE_WAIT_S
    while not (folder / "exit_code").exists():
        if time.monotonic() > deadline:
            pytest.fail(
                f"the smoke run did not finish in {SMOKE_WAIT_S} s; its output is in "
                f"{folder / 'run.log'}"
            )
        time.sleep(0.2)
    if (folder / "exit_code").read_text().strip() != "0":
        log = (folder / "run.log").read_text(encoding="utf-8", errors="replace")
        pytest.fail(f"the smoke run failed:\n{log[-4000:]}")
    return RunPaths(folder / "run")


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


# Test files whose notebook executions take longest, longest first. The files run (in one
# process) or are handed out (under pytest-xdist) in the order set below, so that none waits idle
# for the smoke run: the long files that do not read it first (they run while it runs in the
# background), then half of the short ones, then the long files that read it (it has finished by
# then), then the other short ones, those that read it last.
LONG_FILES = (
    "test_api_path.py",
    "test_notebook_costs.py",
    "test_serving_api.py",
    "test_serving_notebook.py",
    "test_notebooks_pgvector.py",
    "test_notebook_04.py",
    "test_runs_cli.py",
)


def pytest_collection_modifyitems(config, items) -> None:
    reads_smoke = {item.path.name for item in items if "smoke_run" in item.fixturenames}
    short = sorted({item.path.name for item in items} - reads_smoke - set(LONG_FILES))
    first_short = set(short[: len(short) // 2])

    def order(item) -> tuple[int, int]:
        name = item.path.name
        if name in LONG_FILES:
            return (2 if name in reads_smoke else 0), LONG_FILES.index(name)
        if name in reads_smoke:
            return 4, 0
        return (1 if name in first_short else 3), 0

    items.sort(key=order)  # stable: within a file, and among equals, the collected order stays
