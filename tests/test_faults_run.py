"""Faults a real run meets, through the command line, the runner and the real client against
the local OpenAI-compatible server: an outage during notebook 01, and two runs of one name."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest
import yaml
from fake_api.openai_server import CHAT_PATH, Action
from fake_api.stages import stage_of, stage_server

from memcost.calls import read_calls, record_call_key
from memcost.io import read_json
from memcost.params import notebook_parameters
from memcost.paths import REPO_ROOT, RunPaths
from memcost.run import discover_notebooks
from memcost.run.runner import LOCK_NAME

DATASET = "locomo"
KEY_ENV = "MEMCOST_TEST_API_KEY"
KEY = "sk-memcost-fake-5e1d7c3b9a0f2468bdf"
PARAMETERS = {
    "include_no_context": False,
    "include_oracle": False,
    "judge_prompts": ["judge"],
    "max_turns": 20,
}
EXIT_FAILED_ITEMS, EXIT_LOCKED = 3, 4


def preset(folder: Path, steps: list[str]) -> Path:
    notebooks = discover_notebooks()
    declared = set().union(*(notebook_parameters(notebooks[s]) for s in steps))
    path = folder / f"preset-{'-'.join(steps)}.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "description": "fault test",
                "datasets": [DATASET],
                "steps": steps,
                "parameters": {k: v for k, v in PARAMETERS.items() if k in declared},
            }
        )
    )
    return path


def command(preset_path: Path, run_dir: Path, *overrides: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "memcost",
        "run",
        "--params",
        str(preset_path),
        "--run-name",
        str(run_dir),
        "--quiet",
        *[a for o in overrides for a in ("-p", o)],
    ]


def api(url: str) -> tuple[str, ...]:
    return ("backend=custom", f"base_url={url}", f"client={{api_key_env: {KEY_ENV}}}")


def run_cli(args: list[str], cache: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, KEY_ENV: KEY, "MEMCOST_CACHE_DIR": str(cache)}
    return subprocess.run(args, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=400)


# ---------------------------------------------------------------------------------------------
# Two runs with one name
# ---------------------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.timeout(200)
def test_a_second_run_with_the_same_name_stops_at_once(tmp_path):
    run_dir = tmp_path / "shared"
    steps = preset(tmp_path, ["00", "01"])
    env = {**os.environ, "MEMCOST_CACHE_DIR": str(tmp_path / "cache")}
    first = subprocess.Popen(
        command(steps, run_dir),
        cwd=REPO_ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        holder = run_dir / f"{LOCK_NAME}.holder"  # the lock's holder, written once it is held
        deadline = time.monotonic() + 60
        while not (holder.is_file() and holder.read_text().strip()):
            assert first.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        t0 = time.monotonic()
        second = subprocess.run(
            command(steps, run_dir),
            cwd=REPO_ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        took = time.monotonic() - t0
        assert first.poll() is None, "the first run must still be running"
    finally:
        output, _ = first.communicate(timeout=180)
    assert second.returncode == EXIT_LOCKED, second.stderr
    assert f"pid {first.pid}" in second.stderr and "in use" in second.stderr
    assert took < 15  # interpreter start-up; the refusal itself is immediate
    assert first.returncode == 0, output[-3000:]
    calls = read_calls(run_dir)
    assert calls and max(Counter(record_call_key(c) for c in calls).values()) == 1
    # the lock went with the process: the same name runs again (nothing left to do)
    again = subprocess.run(
        command(
            steps,
            run_dir,
        ),
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert again.returncode == 0, again.stderr[-2000:]
    assert len(read_calls(run_dir)) == len(calls)


# ---------------------------------------------------------------------------------------------
# An outage during notebook 01
# ---------------------------------------------------------------------------------------------
def table3(run: RunPaths) -> pd.DataFrame:
    return pd.read_csv(run.dataset(DATASET).table.table3)


def outage(path: str, body: dict) -> bool:
    return path == CHAT_PATH and stage_of(body) == "extract"


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_an_outage_in_notebook_01_fails_the_run_and_a_resume_rebuilds_every_user(tmp_path):
    steps = preset(tmp_path, ["00", "01", "02", "03", "04"])
    with stage_server(api_key=KEY, faults=False) as healthy_server:
        healthy = run_cli(
            command(steps, tmp_path / "healthy", *api(healthy_server.url)),
            tmp_path / "cache-healthy",
        )
    assert healthy.returncode == 0, healthy.stderr[-3000:]

    run = RunPaths(tmp_path / "outage")
    ds = run.dataset(DATASET)
    with stage_server(api_key=KEY, faults=False) as server:
        server.on(outage, Action(status=429, retry_after="1"), times=None)
        down = run_cli(command(steps, run.root, *api(server.url)), tmp_path / "cache")
        # the server is down: the run fails, nothing is marked finished, no later step ran
        assert down.returncode == 1, down.stderr[-3000:]  # notebook 01 failed
        assert "notebook 01" in down.stderr or "01_extract_facts" in down.stderr
        assert not list((ds.memory / "users").glob("*/done.json"))
        assert not ds.answers_file("memory_mem0_style").exists()
        sent_down = server.count(CHAT_PATH, status=429)
        assert sent_down > 0

        server.clear()  # the server is up again
        resumed = run_cli(command(steps, run.root, *api(server.url)), tmp_path / "cache")
        assert resumed.returncode == 0, resumed.stderr[-3000:]
        extract_sent = sum(stage_of(r.body or {}) == "extract" for r in server.requests)
    users = pd.read_parquet(ds.conversations)["conversation_id"].nunique()
    assert len(list((ds.memory / "users").glob("*/done.json"))) == users
    assert extract_sent > 0
    metrics = read_json(ds.metrics / "01_extract_facts.json")
    assert metrics["status"] == "complete" and metrics["failures"]["failed"] == 0
    pd.testing.assert_frame_equal(table3(run), table3(RunPaths(tmp_path / "healthy")))
    assert "Failures" not in run.report_md.read_text()


# ---------------------------------------------------------------------------------------------
# Items that fail for good: exit 3 over allow_failures, 0 within it
# ---------------------------------------------------------------------------------------------
def rejected_segment(path: str, body: dict) -> bool:
    """About one extraction in six, the same ones on every run (by the segment's text)."""
    if path != CHAT_PATH or stage_of(body) != "extract":
        return False
    text = body["messages"][1]["content"]
    return int(hashlib.sha256(text.encode()).hexdigest(), 16) % 6 == 0


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_items_failed_over_allow_failures_exit_3_and_within_it_exit_0(tmp_path):
    steps = preset(tmp_path, ["00", "01"])
    run = RunPaths(tmp_path / "run")
    with stage_server(api_key=KEY, faults=False) as server:
        server.on(
            rejected_segment,
            Action(status=400, error_code="invalid_prompt", message="Invalid prompt: flagged"),
            times=None,
        )
        failed = run_cli(command(steps, run.root, *api(server.url)), tmp_path / "cache")
        assert failed.returncode == EXIT_FAILED_ITEMS, failed.stderr[-3000:]
        assert "items failed after all retries (allowed: 0%" in failed.stderr
        rejected = server.count(CHAT_PATH, status=400)
        metrics = read_json(run.dataset(DATASET).metrics / "01_extract_facts.json")
        failures = metrics["failures"]
        # each failed segment was asked (the walk-through's ones again by the build)
        assert 0 < failures["failed"] <= rejected and failures["failed"] < failures["total"] / 2

        allowed = run_cli(
            command(steps, run.root, *api(server.url)) + ["--allow-failures", "0.5"],
            tmp_path / "cache",
        )
        assert allowed.returncode == 0, allowed.stderr[-3000:]
        # not silently: the last lines name the failed items and the resume that retries them
        failed = f"run go on):\n  01_extract_facts [{DATASET}]: complete with failures ("
        assert failed in allowed.stdout
        assert "Resume to send the failed items again:\n  python -m memcost run" in allowed.stdout
        assert server.count(CHAT_PATH, status=400) > rejected  # asked again, failed again
    again = read_json(run.dataset(DATASET).metrics / "01_extract_facts.json")["failures"]
    assert again["failed"] == failures["failed"]
    assert "Failures" in run.report_md.read_text()
