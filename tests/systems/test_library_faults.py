"""The faults every memory library meets the same way through the gateway, for each library
that runs in its own environment (cognee, Hindsight; mem0's: tests/test_gateway.py and
tests/test_faults_mem0.py): an outage or a budget stop ends the build with nothing built, and a
call the API refuses for one user fails that user only, until a rerun builds it.

Marked slow: each build starts the library."""

from __future__ import annotations

import pytest
from fake_api.openai_server import Action
from library_helpers import build, library_calls, needs, open_library

from memcost.llm import BudgetExceeded, LLMError
from memcost.memory.base import read_done
from memcost.paths import RunPaths

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]
LIBRARIES = [pytest.param(name, marks=needs(name)) for name in ("cognee", "hindsight")]


@pytest.mark.parametrize("name", LIBRARIES)
def test_an_outage_fails_the_stage_never_an_empty_memory(name, library_upstream, tmp_path):
    library_upstream.on(library_calls, Action(status=500, retry_after_ms=1), times=None)
    run = RunPaths(tmp_path / "run").ensure()
    with pytest.raises(LLMError):
        build(name, run, library_upstream, tmp_path)
    assert read_done(open_library(name, run).folder) == {}


@pytest.mark.parametrize("name", LIBRARIES)
def test_a_budget_stop_ends_the_build_with_nothing_built(name, library_upstream, tmp_path):
    run = RunPaths(tmp_path / "run").ensure()
    with pytest.raises(BudgetExceeded):
        build(name, run, library_upstream, tmp_path, max_cost_usd=1e-7)
    assert read_done(open_library(name, run).folder) == {}


@pytest.mark.parametrize("name", LIBRARIES)
def test_a_failure_for_one_user_fails_that_user_and_a_rerun_builds_it(
    name, library_upstream, tmp_path
):
    def evas(path: str, body: dict) -> bool:
        return library_calls(path, body) and "Eva" in str(body["messages"])

    library_upstream.on(
        evas, Action(status=400), times=None
    )  # a request the API refuses, every time
    run = RunPaths(tmp_path / "run").ensure()
    system, report = build(name, run, library_upstream, tmp_path)
    assert report.built == 1 and set(report.failed) == {"pair-2"}
    assert "HTTP 400" in report.failed["pair-2"]
    assert set(read_done(system.folder)) == {"pair-1"}
    library_upstream.clear()
    system, report = build(name, run, library_upstream, tmp_path)
    assert (report.resumed, report.built, report.failed) == (1, 1, {})
    assert set(read_done(system.folder)) == {"pair-1", "pair-2"}


@needs("hindsight")
def test_a_killed_hindsight_server_fails_its_users_and_a_rerun_builds_them(
    library_upstream, tmp_path
):
    import psutil

    def kill_the_server_at_evas_first_call(path: str, body: dict) -> bool:
        if library_calls(path, body) and "Eva" in str(body["messages"]):
            for child in psutil.Process().children(recursive=True):
                try:
                    if "hindsight-api" in " ".join(child.cmdline()):
                        child.kill()
                except psutil.Error:  # ended meanwhile (a zombie has no command line to read)
                    pass
        return False  # answered as usual; the server that asked is gone

    library_upstream.on(kill_the_server_at_evas_first_call, Action(), times=None)
    run = RunPaths(tmp_path / "run").ensure()
    system, report = build("hindsight", run, library_upstream, tmp_path)
    assert report.built == 1 and set(report.failed) == {"pair-2"}
    assert "the Hindsight server ended (killed by signal 9" in report.failed["pair-2"]
    assert set(read_done(system.folder)) == {"pair-1"}
    library_upstream.clear()
    system, report = build("hindsight", run, library_upstream, tmp_path)
    assert (report.resumed, report.built, report.failed) == (1, 1, {})
    assert set(read_done(system.folder)) == {"pair-1", "pair-2"}
