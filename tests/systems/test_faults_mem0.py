"""The mem0 library behind the gateway, through the command line against the local server:
an outage or a budget stop during mem0's own calls ends the run with the repository's exit
codes and its resume command, marks no mem0 user built, and a resume builds them all."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml
from fake_api.openai_server import CHAT_PATH, Action
from fake_api.stages import library_route, stage_server

from memcost.memory import open_system
from memcost.memory.base import read_done
from memcost.paths import REPO_ROOT, RunPaths

pytest.importorskip("mem0", reason="the mem0ai package (make setup installs it)")
pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]
KEY_ENV = "MEMCOST_TEST_API_KEY"
KEY = "sk-memcost-fake-0a9b8c7d6e5f4a3b2c1"
DATASET = "locomo"


def mem0_update(path: str, body: dict) -> bool:
    """mem0's update-phase calls only: the repository's own calls are answered as usual."""
    route = library_route(body) if path == CHAT_PATH else None
    return route is not None and route.step == "mem0/update"


def run_cli(folder: Path, run: RunPaths, url: str, *overrides: str) -> subprocess.CompletedProcess:
    preset = folder / "mem0.yaml"
    preset.write_text(
        yaml.safe_dump(
            {
                "description": "mem0 through the gateway",
                "datasets": [DATASET],
                "steps": ["00", "01"],
                "parameters": {
                    "memory_systems": ["mem0_style", {"mem0": {"vector_store": "faiss"}}]
                },
            }
        )
    )
    args = [
        sys.executable,
        "-m",
        "memcost",
        "run",
        "--params",
        str(preset),
        "--run-name",
        str(run.root),
        "--quiet",
        "-p",
        "backend=custom",
        "-p",
        f"base_url={url}",
        "-p",
        f"client={{api_key_env: {KEY_ENV}}}",
    ]
    for override in overrides:
        args += ["-p", override]
    env = {**os.environ, KEY_ENV: KEY, "MEMCOST_CACHE_DIR": str(folder / "cache")}
    return subprocess.run(args, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=500)


def built(run: RunPaths, system: str) -> set[str]:
    return set(read_done(open_system(system, run.dataset(DATASET), dataset=DATASET).folder))


def users(run: RunPaths) -> set[str]:
    return set(pd.read_parquet(run.dataset(DATASET).conversations)["conversation_id"])


EXIT_FAILED_ITEMS = 3


@pytest.mark.parametrize(
    "fault, code, says",
    [
        # every mem0 update answered 500 while the study's own calls are answered: mem0 swallows
        # the HTTP error, the adapter fails those users, and the stage's failed items end the run
        (
            Action(status=500, retry_after_ms=1),
            EXIT_FAILED_ITEMS,
            "mem0: 30 calls failed: HTTP 500",
        ),
        # the provider bills $1 a call (OpenRouter's usage.cost): the budget stops the run
        (Action(cost=1.0), 1, "BudgetExceeded"),
    ],
)
def test_a_fault_in_mem0s_calls_ends_the_run_and_a_resume_builds_every_user(
    tmp_path, fault, code, says
):
    run = RunPaths(tmp_path / "run")
    with stage_server(api_key=KEY, faults=False) as server:
        server.on(mem0_update, fault, times=None)
        stopped = run_cli(tmp_path, run, server.url, "max_cost_usd=0.5")
        assert stopped.returncode == code, stopped.stderr[-3000:]
        assert "01_extract_facts" in stopped.stderr and says in stopped.stderr
        assert f"--run-name {run.root}" in stopped.stderr  # the resume command
        assert built(run, "mem0") == set()  # never an empty memory marked built
        assert server.count(CHAT_PATH) > 0 and any(
            mem0_update(CHAT_PATH, r.body or {}) for r in server.requests
        )
        server.clear()
        # what was billed stays spent: a budget stop resumes with a higher limit, as it says
        resumed = run_cli(tmp_path, run, server.url, "max_cost_usd=5")
        assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert (
        built(run, "mem0")
        == users(run)
        == {p.parent.name for p in (run.dataset(DATASET).memory / "users").glob("*/done.json")}
    )
