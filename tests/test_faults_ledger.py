"""The ledger is protected and the cache checked: through the command line against the local
server, a deleted or truncated ``calls.jsonl`` stops the run with the repair command, the
repair rebuilds it from the cache, and a damaged cache file is named with the two ways out."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import yaml

from memcost.calls import is_paid
from memcost.io import read_jsonl
from memcost.llm.ledger import record_call_key
from memcost.paths import REPO_ROOT, RunPaths
from memcost.testing.openai_server import CHAT_PATH
from memcost.testing.stages import stage_server

KEY_ENV = "MEMCOST_TEST_API_KEY"
KEY = "sk-memcost-fake-71c2e9a40b3d5f8e6a1"
pytestmark = [pytest.mark.slow, pytest.mark.timeout(400)]


def cli(args: list[str], cache: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, KEY_ENV: KEY, "MEMCOST_CACHE_DIR": str(cache)}
    return subprocess.run(
        [sys.executable, "-m", "memcost", *args],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ledger")
    preset = tmp / "p.yaml"
    preset.write_text(yaml.safe_dump({"datasets": ["locomo"], "steps": ["00", "01"]}))
    with stage_server(api_key=KEY, faults=False) as server:

        def run(name: str, *extra: str, cache: Path = tmp / "cache"):
            return cli(
                [
                    "run",
                    "--params",
                    str(preset),
                    "--run-name",
                    str(tmp / name),
                    "--quiet",
                    "-p",
                    "backend=custom",
                    "-p",
                    f"base_url={server.url}",
                    "-p",
                    f"client={{api_key_env: {KEY_ENV}}}",
                    *extra,
                ],
                cache,
            )

        first = run("run")
        assert first.returncode == 0, first.stderr[-3000:]
        yield tmp, server, run


def paid_hashes(run: RunPaths) -> Counter:
    return Counter(r["request_hash"] for r in read_jsonl(run.calls) if is_paid(r))


def test_a_deleted_ledger_stops_the_run_and_repair_rebuilds_it(world):
    tmp, server, run = world
    paths = RunPaths(tmp / "run")
    before = read_jsonl(paths.calls)
    paid = paid_hashes(paths)
    assert sum(paid.values()) > 0
    paths.calls.unlink()
    sent = len(server.requests)
    stopped = run("run")
    assert stopped.returncode == 2
    assert "calls.jsonl is missing" in stopped.stderr
    assert f"python -m memcost repair-ledger {tmp / 'run'}" in stopped.stderr
    assert len(server.requests) == sent  # nothing sent, nothing recorded
    assert not paths.calls.exists()

    repaired = cli(["repair-ledger", str(tmp / "run")], tmp / "cache")
    assert repaired.returncode == 0, repaired.stderr
    records = read_jsonl(paths.calls)
    assert sorted(record_call_key(r) for r in records) == sorted(record_call_key(r) for r in before)
    assert paid_hashes(paths) == paid  # every paid call, once, with its usage and tags
    by_hash = {r["request_hash"]: r for r in before if is_paid(r)}
    for record in (r for r in records if is_paid(r)):
        original = by_hash[record["request_hash"]]
        for field in (
            "stage",
            "model",
            "backend",
            "prompt_tokens",
            "completion_tokens",
            "dataset",
            "conversation_id",
            "sample_index",
        ):
            assert record[field] == original[field], field

    resumed = run("run")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert len(server.requests) == sent
    keys = Counter(record_call_key(r) for r in read_jsonl(paths.calls))
    assert max(keys.values()) == 1


def test_a_run_served_from_the_cache_gets_its_whole_ledger_back(world):
    # a second run asks what the first paid for: every call is a cache hit, free but counted
    # at list price in its cost tables. Its lost ledger used to go unnoticed (nothing paid to
    # miss) and could not be rebuilt; the cache notes who read it.
    tmp, server, run = world
    sent = len(server.requests)
    again = run("again")
    assert again.returncode == 0, again.stderr[-3000:]
    assert len(server.requests) == sent
    paths = RunPaths(tmp / "again")
    before = read_jsonl(paths.calls)
    assert before and all(r["cached"] for r in before)
    paths.calls.unlink()
    stopped = run("again")
    assert stopped.returncode == 2
    assert f"{len(before)} calls it was served from the cache" in stopped.stderr
    repaired = cli(["repair-ledger", str(tmp / "again")], tmp / "cache")
    assert repaired.returncode == 0, repaired.stderr
    assert f"{len(before)} missing record(s) rebuilt" in repaired.stdout
    records = read_jsonl(paths.calls)
    assert sorted(record_call_key(r) for r in records) == sorted(record_call_key(r) for r in before)
    assert [r["prompt_tokens"] for r in sorted(records, key=record_call_key)] == [
        r["prompt_tokens"] for r in sorted(before, key=record_call_key)
    ]
    assert run("again").returncode == 0


def test_a_truncated_ledger_stops_the_run(world):
    tmp, server, run = world
    paths = RunPaths(tmp / "run")
    lines = paths.calls.read_text().splitlines(keepends=True)
    paths.calls.write_text("".join(lines[:2]))
    stopped = run("run")
    assert stopped.returncode == 2 and "calls.jsonl is truncated" in stopped.stderr
    assert cli(["repair-ledger", str(tmp / "run")], tmp / "cache").returncode == 0


def test_a_damaged_cache_is_named_with_the_two_ways_out(world):
    tmp, server, run = world
    damaged = tmp / "damaged"
    shutil.copytree(tmp / "cache", damaged)
    (db,) = damaged.glob("*.sqlite")
    for extra in damaged.glob("*.sqlite-*"):
        extra.unlink()
    data = bytearray(db.read_bytes())
    data[200:4000] = b"\x00garbage" * 475  # the first page's b-tree and beyond
    db.write_bytes(bytes(data))
    stopped = run("run", cache=damaged)
    assert stopped.returncode == 2, stopped.stderr[-2000:]
    assert str(db) in stopped.stderr
    assert "move it aside" in stopped.stderr and "client={cache_mode: off}" in stopped.stderr
    assert "DatabaseError" not in stopped.stderr and "check_dataset" not in stopped.stderr
    chats = len([r for r in server.requests if r.path == CHAT_PATH])
    assert chats > 0
