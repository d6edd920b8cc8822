"""Fast variants of the ledger and cache checks (the command-line runs are in
test_faults_ledger.py): the real client against the local server, then the stores damaged."""

from __future__ import annotations

import sqlite3

import pytest
from llm_helpers import TEST_KEY, api_client, question

from memcost.calls import is_paid
from memcost.io import read_jsonl
from memcost.llm.cache import CacheCorrupted, ResponseCache
from memcost.llm.ledger import LedgerDamaged, check_ledger, repair_ledger
from memcost.testing.openai_server import FakeOpenAIServer


@pytest.fixture
def paid_run(run_paths, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", TEST_KEY)
    with FakeOpenAIServer(api_key=TEST_KEY) as server:
        client = api_client(run_paths, server.url, tmp_path)
        client.chat_many([question(i, tags={"conversation_id": f"c{i}"}) for i in range(40)])
        client.close()
    return run_paths, tmp_path / "cache.sqlite"


def test_a_deleted_ledger_is_found_and_rebuilt_with_its_tags(paid_run):
    run, cache_path = paid_run
    before = sorted(
        (r["request_hash"], r["conversation_id"], r["prompt_tokens"])
        for r in read_jsonl(run.calls)
        if is_paid(r)
    )
    assert len(before) == 40
    cache = ResponseCache(cache_path)
    check_ledger(run.calls, cache, run.run_id(), "r")  # whole: nothing to say
    run.calls.unlink()
    with pytest.raises(LedgerDamaged, match="is missing.*40 calls.*repair-ledger r"):
        check_ledger(run.calls, cache, run.run_id(), "r")
    assert repair_ledger(run.calls, cache, run.run_id()) == 40
    after = sorted(
        (r["request_hash"], r["conversation_id"], r["prompt_tokens"])
        for r in read_jsonl(run.calls)
        if is_paid(r)
    )
    assert after == before
    assert repair_ledger(run.calls, cache, run.run_id()) == 0  # idempotent
    cache.close()


def test_a_few_unrecorded_calls_are_a_kill_not_a_damage(paid_run):
    run, cache_path = paid_run
    lines = run.calls.read_text().splitlines(keepends=True)
    run.calls.write_text("".join(lines[:-3]))  # killed between cache rows and records
    with _open(cache_path) as cache:
        check_ledger(run.calls, cache, run.run_id(), "r")
        run.calls.write_text("".join(lines[:5]))
        with pytest.raises(LedgerDamaged, match="is truncated"):
            check_ledger(run.calls, cache, run.run_id(), "r")


class _open:
    def __init__(self, path):
        self.cache = ResponseCache(path)

    def __enter__(self):
        return self.cache

    def __exit__(self, *exc):
        self.cache.close()


def test_a_damaged_cache_names_the_file_and_the_two_ways_out(paid_run):
    _, cache_path = paid_run
    with sqlite3.connect(cache_path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    data = bytearray(cache_path.read_bytes())
    data[200:4000] = b"\x00garbage" * 475
    cache_path.write_bytes(bytes(data))
    with pytest.raises(CacheCorrupted) as info:
        ResponseCache(cache_path)
    message = str(info.value)
    assert str(cache_path) in message and "move it aside" in message
    assert "client={cache_mode: off}" in message


def test_a_billed_call_is_recorded_even_when_the_cache_write_fails(
    run_paths, tmp_path, monkeypatch
):
    # the cache's disk is full: the answered call was billed, so it is recorded all the same;
    # the cache error still stops the call (and names itself), but no money goes unseen
    monkeypatch.setenv("OPENAI_API_KEY", TEST_KEY)
    with FakeOpenAIServer(api_key=TEST_KEY) as server:
        client = api_client(run_paths, server.url, tmp_path)

        def full_disk(*args, **kwargs):
            raise sqlite3.OperationalError("database or disk is full")

        monkeypatch.setattr(client.cache, "put", full_disk)
        with pytest.raises(sqlite3.OperationalError, match="disk is full"):
            client.chat(question(1))
        client.close()
    records = read_jsonl(run_paths.calls)
    assert len(records) == 1 and is_paid(records[0]) and not records[0]["cached"]
    assert records[0]["prompt_tokens"] > 0 and records[0]["error"] is None


def test_records_overwritten_in_the_middle_are_damage_not_a_torn_line(paid_run):
    # five paid records in the middle of calls.jsonl overwritten (a disk error, an editor):
    # never skipped silently as if a kill had torn them; repair-ledger restores them
    run, cache_path = paid_run
    before = sorted(r["request_hash"] for r in read_jsonl(run.calls) if is_paid(r))
    lines = run.calls.read_text().splitlines(keepends=True)
    for i in range(10, 15):
        lines[i] = "x" * (len(lines[i]) - 1) + "\n"
    run.calls.write_text("".join(lines))
    with pytest.raises(ValueError, match=r"calls.jsonl: line 11 is not valid JSON"):
        read_jsonl(run.calls)
    with _open(cache_path) as cache:
        with pytest.raises(LedgerDamaged, match=r"line 11 .*damaged.*repair-ledger r"):
            check_ledger(run.calls, cache, run.run_id(), "r")
        assert repair_ledger(run.calls, cache, run.run_id()) == 5
        check_ledger(run.calls, cache, run.run_id(), "r")
    after = sorted(r["request_hash"] for r in read_jsonl(run.calls) if is_paid(r))
    assert after == before
    kept = list(run.calls.parent.glob("calls.jsonl.damaged-*"))
    assert len(kept) == 1 and "x" * 20 in kept[0].read_text()  # the damaged file is kept aside


def test_a_torn_last_line_is_cut_when_the_file_is_appended_to_again(tmp_path):
    from memcost.io import JsonlAppender

    path = tmp_path / "a.jsonl"
    path.write_text('{"a": 1}\n{"a": 2}\n{"a": 3, "b": "tor', encoding="utf-8")
    assert read_jsonl(path) == [{"a": 1}, {"a": 2}]  # a kill mid-write: the last line only
    with JsonlAppender(path) as out:
        out.write({"a": 4})
    assert read_jsonl(path) == [{"a": 1}, {"a": 2}, {"a": 4}]
    assert path.read_text(encoding="utf-8").count("\n") == 3


def test_a_read_only_cache_is_not_called_damaged(paid_run, monkeypatch):
    # moving a read-only cache aside (the advice for a damaged one) would make every finished
    # call paid again: it must say what it is, and how to make it usable
    import memcost.llm.cache as cache_module

    _, cache_path = paid_run
    real_connect = sqlite3.connect

    def read_only(path, **kwargs):
        return real_connect(f"file:{path}?mode=ro", uri=True, **kwargs)

    monkeypatch.setattr(cache_module.sqlite3, "connect", read_only)
    with pytest.raises(cache_module.CacheUnwritable) as info:
        ResponseCache(cache_path)
    message = str(info.value)
    assert f"the response cache {cache_path} cannot be written" in message
    assert "damaged" not in message and "move it aside" not in message
    assert "chmod" in message and "cache_path" in message


def test_handles_of_dead_processes_are_dropped_so_the_last_live_one_stops_the_server(tmp_path):
    # after a kill, the wheel's list of processes using the server keeps the dead one, and the
    # server is never stopped (a resume's exit sees another "user"): the dead are dropped first
    import json
    import os

    from memcost.vectorstore.embedded import HANDLES_FILE, prune_dead_handles

    pgdata = tmp_path / "pgdata"
    pgdata.mkdir()
    (pgdata / HANDLES_FILE).write_text(json.dumps([2147483646, os.getpid()]))
    assert prune_dead_handles(pgdata) == [os.getpid()]
    assert json.loads((pgdata / HANDLES_FILE).read_text()) == [os.getpid()]
    assert prune_dead_handles(tmp_path / "none") == []  # no list: nothing to do


# A stand-in postmaster: a process that exits on SIGINT (PostgreSQL's fast shutdown). It says
# when its handler is in place, so a SIGINT never arrives before it can act on it.
STAND_IN = (
    "import signal, time; signal.signal(signal.SIGINT, signal.default_int_handler); "
    "print('ready', flush=True); time.sleep(60)"
)


def stand_in_postmaster():
    import subprocess
    import sys

    process = subprocess.Popen([sys.executable, "-c", STAND_IN], stdout=subprocess.PIPE, text=True)
    assert process.stdout.readline().strip() == "ready"
    return process


def test_a_server_left_by_a_killed_kernel_is_stopped_by_the_runner(tmp_path):
    import json

    from memcost.vectorstore.embedded import HANDLES_FILE, stop_orphaned_server

    pgdata = tmp_path / "pgdata"
    pgdata.mkdir()
    server = stand_in_postmaster()
    try:
        (pgdata / "postmaster.pid").write_text(f"{server.pid}\n{pgdata}\n")
        (pgdata / HANDLES_FILE).write_text(json.dumps([server.pid + 10_000_000]))  # dead
        assert stop_orphaned_server(pgdata) == server.pid
        assert server.wait(timeout=10) != 0  # interrupted
        assert stop_orphaned_server(pgdata) is None  # nothing left to stop
    finally:
        server.kill()


@pytest.mark.timeout(30)
def test_a_watch_stops_only_its_own_server_never_the_next_one_on_the_same_data(tmp_path):
    # one notebook's server ends, the next notebook's starts on the same data within the watch's
    # second, before its first user is registered: the old watch saw a server nobody used and
    # stopped it, and the next start on that data failed
    import json
    import subprocess
    import sys

    from memcost.vectorstore.embedded import HANDLES_FILE, watch

    pgdata = tmp_path / "pgdata"
    pgdata.mkdir()
    ended = subprocess.Popen([sys.executable, "-c", "pass"])  # the watched server: gone
    ended.wait()
    servers = [stand_in_postmaster() for _ in range(2)]
    try:
        (pgdata / HANDLES_FILE).write_text(json.dumps([]))  # no user registered yet
        (pgdata / "postmaster.pid").write_text(f"{servers[0].pid}\n{pgdata}\n")
        watch(pgdata, ended.pid, interval=0.05)  # its server is gone: it ends, stopping nothing
        assert servers[0].poll() is None
        (pgdata / "postmaster.pid").write_text(f"{servers[1].pid}\n{pgdata}\n")
        watch(pgdata, servers[1].pid, interval=0.05)  # its own server, unused: stopped
        assert servers[1].wait(timeout=10) != 0
        assert servers[0].poll() is None
    finally:
        for server in servers:
            server.kill()


def test_a_repaired_record_is_the_same_call_as_the_one_it_rebuilds(paid_run):
    # 'repaired' says how a record was made, not which call it is: read as a tag, it gave the
    # rebuilt record another identity, and a replay of the call was then recorded twice
    from memcost.calls import record_call_key

    run, cache_path = paid_run
    before = {record_call_key(r) for r in read_jsonl(run.calls) if is_paid(r)}
    run.calls.unlink()
    with _open(cache_path) as cache:
        assert repair_ledger(run.calls, cache, run.run_id()) == 40
    rebuilt = read_jsonl(run.calls)
    assert all(r["repaired"] for r in rebuilt)
    assert {record_call_key(r) for r in rebuilt} == before


def test_a_repair_gives_back_the_calls_served_from_the_cache(run_paths, tmp_path, monkeypatch):
    # the cost tables count a cache hit at list price: a repair that rebuilt only the paid
    # calls changed them silently; the cache now notes who read a row, and the repair gives
    # every record back
    from memcost.calls import record_call_key

    monkeypatch.setenv("OPENAI_API_KEY", TEST_KEY)
    run, cache_path = run_paths, tmp_path / "cache.sqlite"
    with FakeOpenAIServer(api_key=TEST_KEY) as server:
        for step in ("walk-through", "batch"):  # the second asks the same: all from the cache
            client = api_client(run, server.url, tmp_path)
            client.chat_many(
                [question(i, tags={"conversation_id": f"c{i}", "step": step}) for i in range(40)]
            )
            client.close()
        assert len(server.requests) == 40
    before = sorted(record_call_key(r) for r in read_jsonl(run.calls))
    assert len(before) == 80 and sum(not is_paid(r) for r in read_jsonl(run.calls)) == 40
    run.calls.unlink()
    with _open(cache_path) as cache:
        assert repair_ledger(run.calls, cache, run.run_id()) == 80
        assert repair_ledger(run.calls, cache, run.run_id()) == 0  # idempotent
    rebuilt = read_jsonl(run.calls)
    assert sorted(record_call_key(r) for r in rebuilt) == before
    assert sum(r["cached"] for r in rebuilt) == 40


def test_a_server_whose_only_user_is_killed_stops_within_seconds(tmp_path):
    # the runner killed with SIGKILL takes its kernel with it, and nobody used to stop the
    # run's PostgreSQL until the next run on the same directory: the watch started with the
    # server stops it as soon as no live process uses it
    import os
    import shutil
    import signal
    import subprocess
    import sys
    import tempfile
    import time
    from pathlib import Path

    from memcost.vectorstore.embedded import ServerUnavailable, alive, provider

    try:
        provider()
    except ServerUnavailable as err:
        pytest.skip(str(err))
    folder = Path(tempfile.mkdtemp(prefix="memcost-watch-"))  # a server's folder: not in tmp
    user = subprocess.Popen(
        [
            sys.executable,
            "-c",
            (
                "import sys, time\nfrom memcost.vectorstore.embedded import PgServer\n"
                f"PgServer({str(folder)!r}).start()\nprint('up', flush=True)\ntime.sleep(120)"
            ),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    pid = None
    try:
        assert user.stdout.readline().strip() == "up"
        pid = int((folder / "pgdata" / "postmaster.pid").read_text().split()[0])
        time.sleep(1.5)  # a live user: the server is left running
        assert alive(pid)
        user.send_signal(signal.SIGKILL)
        user.wait()
        deadline = time.monotonic() + 15
        while alive(pid):
            assert time.monotonic() < deadline, "the server outlived its killed user"
            time.sleep(0.1)
        assert not (folder / "pgdata" / "postmaster.pid").exists()  # a clean shutdown
    finally:
        user.kill()
        if pid is not None and alive(pid):  # the test failed: leave no server behind
            os.kill(pid, signal.SIGINT)
        shutil.rmtree(folder, ignore_errors=True)
