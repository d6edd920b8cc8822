"""An emptied cache does not re-bill the notebooks' walk-through calls.

Notebooks 01 and 02 walk one user and one question through the algorithm with real calls before
the batch. The batch skips finished items by its output files; the walk-through's calls are
remembered in the run directory by request key, so a rerun after the response cache was emptied
sends none of them again, records none twice, and every cost table stays as it was. Through the
command line and the real ``openai`` client against the local server.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import yaml
from llm_helpers import TEST_KEY, api_client, question

from memcost.io import read_jsonl
from memcost.llm.ledger import record_call_key
from memcost.paths import REPO_ROOT, RunPaths
from memcost.testing.openai_server import CHAT_PATH, EMBEDDINGS_PATH, FakeOpenAIServer
from memcost.testing.stages import stage_of, stage_server

KEY_ENV = "MEMCOST_TEST_API_KEY"
KEY = "sk-memcost-fake-3b8e1f0c9d2a7e6b5c4"


def cli(args: list[str], cache: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, KEY_ENV: KEY, "MEMCOST_CACHE_DIR": str(cache)}
    return subprocess.run(
        [sys.executable, "-m", "memcost", *args],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=500,
    )


def empty_cache(cache: Path) -> int:
    """Delete every stored response (the file stays, as after a user empties it)."""
    (db,) = cache.glob("*.sqlite")
    with sqlite3.connect(db) as conn:
        removed = conn.execute("DELETE FROM responses").rowcount
    return removed


def cost_tables(run: RunPaths) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted(run.tables.glob("cost*.csv"))}


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_an_emptied_cache_sends_no_walkthrough_call_again(tmp_path):
    preset = tmp_path / "p.yaml"
    preset.write_text(
        yaml.safe_dump(
            {
                "datasets": ["locomo"],
                "steps": ["00", "01", "02", "05"],
            }
        )
    )
    cache = tmp_path / "cache"
    paths = RunPaths(tmp_path / "run")
    with stage_server(api_key=KEY, faults=False) as server:

        def run():
            return cli(
                [
                    "run",
                    "--params",
                    str(preset),
                    "--run-name",
                    str(paths.root),
                    "--quiet",
                    "-p",
                    "backend=custom",
                    "-p",
                    f"base_url={server.url}",
                    "-p",
                    f"client={{api_key_env: {KEY_ENV}}}",
                ],
                cache,
            )

        first = run()
        assert first.returncode == 0, first.stderr[-3000:]
        sent = len(server.requests)
        assert sent > 0
        records = read_jsonl(paths.calls)
        tables = cost_tables(paths)
        assert len(tables) >= 5, sorted(tables)
        # The walk-through's calls are in the ledger once, with the batch's.
        walk = [r for r in records if r.get("stage") in ("extract", "read")]
        assert walk

        assert empty_cache(cache) > 0
        second = run()
        assert second.returncode == 0, second.stderr[-3000:]
        again = server.requests[sent:]
        assert again == [], Counter((r.path, stage_of(r.body or {})) for r in again)
        after = read_jsonl(paths.calls)
        keys = Counter(record_call_key(r) for r in after)
        assert max(keys.values()) == 1, [k for k, n in keys.items() if n > 1][:5]
        assert len(after) == len(records)
        assert cost_tables(paths) == tables


def test_walkthrough_calls_are_served_from_the_run_not_sent_again(run_paths, tmp_path, monkeypatch):
    """The fast variant: the real client against the local server, the cache emptied between."""
    monkeypatch.setenv("OPENAI_API_KEY", TEST_KEY)
    with FakeOpenAIServer(api_key=TEST_KEY) as server:

        def walk(**options):
            client = api_client(run_paths, server.url, tmp_path, **options)
            with client.walkthrough():
                reply = client.chat(question(1, tags={"conversation_id": "c1"}))
                vectors = client.embed(["a fact"], tags={"conversation_id": "c1"})
            batch = None
            if client.cache is not None:  # the batch's same call: from the cache
                batch = client.chat(question(1, tags={"conversation_id": "c1"}))
            client.close()
            return reply, vectors, batch

        first, vectors, batch = walk()
        assert first.ok and not first.cached and batch.cached  # the batch came from the cache
        assert (server.count(CHAT_PATH), server.count(EMBEDDINGS_PATH)) == (1, 1)
        empty_cache(tmp_path)
        again, again_vectors, _ = walk(cache_mode="off")  # even with no cache at all
        assert again.text == first.text and (again_vectors == vectors).all()
        assert (server.count(CHAT_PATH), server.count(EMBEDDINGS_PATH)) == (1, 1)
        # without the walk-through's memo the same call is sent (and paid) again
        client = api_client(run_paths, server.url, tmp_path)
        empty_cache(tmp_path)
        client.chat(question(1, tags={"conversation_id": "c1"}))
        client.close()
        assert server.count(CHAT_PATH) == 2
    records = read_jsonl(run_paths.calls)
    paid = Counter(r["request_hash"] for r in records if not r["cached"])
    assert sorted(paid.values()) == [1, 2]  # the embedding once; the chat once per send
    assert len(read_jsonl(run_paths.walkthrough)) == 2
