"""The run's one store of calls (``calls.sqlite``) and the run's PostgreSQL server, when they
are damaged or their process is killed: the real client against the local server."""

from __future__ import annotations

import os
import sqlite3

import pytest
from fake_api.openai_server import Action, FakeOpenAIServer
from llm_helpers import TEST_KEY, api_client, question

from memcost.calls import CallStore, StoreError, is_paid, read_calls, store_path
from memcost.io import read_jsonl
from memcost.llm import CacheMiss
from memcost.paths import RunPaths

QUESTIONS = [question(i, tags={"conversation_id": f"c{i}"}) for i in range(40)]


@pytest.fixture
def server(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", TEST_KEY)
    with FakeOpenAIServer(api_key=TEST_KEY) as server:
        yield server


@pytest.fixture
def paid_run(run_paths, tmp_path, server):
    client = api_client(run_paths, server.url, tmp_path)
    client.chat_many(QUESTIONS)
    client.close()
    start = server.count()
    server.clear()
    assert start == 40
    return run_paths


def _rows(run):
    conn = sqlite3.connect(store_path(run.root))
    try:  # closed here: a connection left to the collector removes its WAL file at any time
        return conn.execute("SELECT record, answer FROM calls").fetchall()
    finally:
        conn.close()


def test_a_paid_call_is_one_row_its_record_with_its_answer(paid_run):
    # one statement writes both: a kill can leave a call neither recorded nor stored, never
    # one without the other, so there is no second store to repair from
    rows = _rows(paid_run)
    assert len(rows) == 40 and all(answer is not None for _, answer in rows)
    assert all(is_paid(r) for r in read_calls(paid_run))
    assert sorted(p.name for p in paid_run.root.iterdir() if "calls" in p.name)[0] == "calls.sqlite"


def test_a_rerun_of_the_same_run_sends_and_records_nothing(paid_run, tmp_path, server):
    again = api_client(paid_run, server.url, tmp_path)
    results = again.chat_many(QUESTIONS)
    again.close()
    assert server.count() == 0 and all(r.ok and r.cached for r in results)
    assert again.stats.replayed == 40 and len(read_calls(paid_run)) == 40


def test_another_run_is_served_the_answers_of_a_run_it_reuses(paid_run, tmp_path, server):
    fresh = RunPaths(tmp_path / "fresh").ensure()
    alone = api_client(fresh, server.url, tmp_path, cache_mode="replay_only")
    with pytest.raises(CacheMiss, match="replay_only.*no stored answer"):
        alone.chat(QUESTIONS[1])
    alone.close()
    client = api_client(
        fresh, server.url, tmp_path, reuse_runs=[str(paid_run.root)], cache_mode="replay_only"
    )
    results = client.chat_many(QUESTIONS[:3])
    client.close()
    assert server.count() == 0 and all(r.ok for r in results)
    records = read_calls(fresh)
    # served, not paid; the answers copied, so the fresh run stands on its own
    assert len(records) == 3 and all(r["cached"] and not is_paid(r) for r in records)
    assert all(answer is not None for _, answer in _rows(fresh))
    assert len(read_calls(paid_run)) == 40  # the reused run is read, never written


def _damage(path):
    """Garbage over the start of the store's pages (its WAL folded in first)."""
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    data = bytearray(path.read_bytes())
    data[200:4000] = b"\x00garbage" * 475
    path.write_bytes(bytes(data))
    return path


def test_a_damaged_store_names_the_file_and_the_way_out(paid_run):
    path = _damage(store_path(paid_run.root))
    with pytest.raises(StoreError) as info:
        CallStore(paid_run.root)  # a reader (memcost runs, the cost tables) only says so
    message = str(info.value)
    assert str(path) in message and "damaged" in message and f"mv {path} {path}.damaged" in message


def test_a_run_sets_a_damaged_store_aside_and_goes_on(paid_run, tmp_path, server, capfd):
    _damage(store_path(paid_run.root))
    client = api_client(paid_run, server.url, tmp_path)  # the client opens it: set aside
    results = client.chat_many(QUESTIONS[:5])
    client.close()
    err = capfd.readouterr().err
    aside = [
        p
        for p in paid_run.root.iterdir()
        if p.name.startswith("calls.sqlite.damaged-") and not p.name.endswith(("-wal", "-shm"))
    ]
    assert [p.read_bytes()[200:208] for p in aside] == [b"\x00garbage"]
    assert f"set aside as {aside[0].name}" in err and "Traceback" not in err
    # the run goes on with a new store: the calls it held are made again, and kept this time
    assert all(r.ok for r in results) and server.count() == 5 and len(read_calls(paid_run)) == 5
    # and the report's first screen says the cost tables no longer count the calls set aside
    from memcost.run.report.headline import ledger_replaced
    from memcost.run.report.view import RunView

    assert ledger_replaced(RunView(paid_run, {})) == (
        f"**Costs incomplete:** the run's store of calls was damaged and set aside "
        f"({aside[0].name}); the cost tables count only the calls made since, not those of the "
        "notebooks that had finished before it."
    )


def test_a_read_only_store_is_not_called_damaged(paid_run, monkeypatch):
    # moving a read-only store aside (the advice for a damaged one) would make every finished
    # call paid again: it must say what it is, and how to make it usable (root writes through
    # file modes, so the store is opened read-only the way SQLite sees an unwritable file)
    import memcost.calls as calls_module

    real_connect = sqlite3.connect

    def read_only(database, **kwargs):
        return real_connect(f"{database}?mode=ro", **kwargs)

    monkeypatch.setattr(calls_module.sqlite3, "connect", read_only)
    with pytest.raises(StoreError) as info:
        CallStore(paid_run.root).add({"request_hash": "x"})
    message = str(info.value)
    assert "damaged" not in message and "make it and its folder writable" in message


def test_a_full_disk_says_so_in_one_line(run_paths, tmp_path, server, monkeypatch):
    client = api_client(run_paths, server.url, tmp_path)

    def full_disk(*args, **kwargs):
        raise client.store._error(sqlite3.OperationalError("database or disk is full"))

    monkeypatch.setattr(client.store, "add", full_disk)
    with pytest.raises(StoreError, match="disk holding .* is full: free space, then resume"):
        client.chat(question(1))
    client.close()


def test_a_torn_last_line_is_cut_when_the_file_is_appended_to_again(tmp_path):
    from memcost.io import JsonlAppender

    path = tmp_path / "a.jsonl"
    path.write_text('{"a": 1}\n{"a": 2}\n{"a": 3, "b": "tor', encoding="utf-8")
    assert read_jsonl(path) == [{"a": 1}, {"a": 2}]  # a kill mid-write: the last line only
    with JsonlAppender(path) as out:
        out.write({"a": 4})
    assert read_jsonl(path) == [{"a": 1}, {"a": 2}, {"a": 4}]
    assert path.read_text(encoding="utf-8").count("\n") == 3


def test_handles_of_dead_processes_are_dropped_so_the_last_live_one_stops_the_server(tmp_path):
    # after a kill, the wheel's list of processes using the server keeps the dead one, and the
    # server is never stopped (a resume's exit sees another "user"): the dead are dropped first
    import json

    from memcost_pgvector.store import HANDLES_FILE, prune_dead_handles

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

    from memcost_pgvector.store import HANDLES_FILE, stop_orphaned_server

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

    from memcost_pgvector.store import HANDLES_FILE, watch

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


def test_a_server_whose_only_user_is_killed_stops_within_seconds(tmp_path):
    # the runner killed with SIGKILL takes its kernel with it, and nobody used to stop the
    # run's PostgreSQL until the next run on the same directory: the watch started with the
    # server stops it as soon as no live process uses it
    import shutil
    import signal
    import subprocess
    import sys
    import tempfile
    import time
    from pathlib import Path

    from memcost_pgvector.store import ServerUnavailable, alive, provider

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
                "import sys, time\nfrom memcost_pgvector.store import PgServer\n"
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


def test_a_damaged_row_is_passed_over_in_one_line_and_the_rerun_completes(
    paid_run, tmp_path, server, capsys
):
    """A torn or edited row (unreadable JSON) used to stop every rerun with a bare
    JSONDecodeError. Now: a damaged answer is asked again (the only call paid twice: its answer
    is gone), a damaged record leaves its cost out, each said in one line, and the run goes on."""
    with sqlite3.connect(store_path(paid_run.root)) as conn:
        seqs = [s for (s,) in conn.execute("SELECT seq FROM calls ORDER BY seq LIMIT 2")]
        conn.execute('UPDATE calls SET answer = \'{"text": "tru\' WHERE seq = ?', (seqs[0],))
        conn.execute("UPDATE calls SET record = '{\"stage\": ' WHERE seq = ?", (seqs[1],))
    assert len(read_calls(paid_run)) == 39  # the damaged record is left out, not a traceback
    again = api_client(paid_run, server.url, tmp_path)
    results = again.chat_many(QUESTIONS)
    again.close()
    assert all(r.ok for r in results)
    assert server.count() == 1  # only the call whose answer was lost
    err = capsys.readouterr().err
    assert "a stored answer is damaged (not readable JSON): its call is made again" in err
    assert "a call record is damaged (not readable JSON)" in err and "Traceback" not in err


def test_no_paid_call_is_sent_without_room_for_its_answer_and_a_resume_pays_none_twice(
    run_paths, tmp_path, server, monkeypatch
):
    import memcost.calls as calls_module

    real = calls_module.shutil.disk_usage
    room = {"full": False}

    def disk_usage(path):
        usage = real(path)
        if room["full"]:
            return type(usage)(usage.total, usage.total - 2**20, 2**20)
        return usage

    monkeypatch.setattr(calls_module.shutil, "disk_usage", disk_usage)
    client = api_client(run_paths, server.url, tmp_path)
    client.chat_many(QUESTIONS[:10])
    room["full"] = True  # the disk fills
    with pytest.raises(StoreError) as info:
        client.chat_many(QUESTIONS)
    client.close()
    message = str(info.value)
    assert "has 1 MB free" in message and "nothing was sent" in message and "\n" not in message
    assert server.count() == 10 and len(read_calls(run_paths)) == 10  # paid answers all kept

    monkeypatch.setattr(calls_module.shutil, "disk_usage", real)  # room made
    again = api_client(run_paths, server.url, tmp_path)
    results = again.chat_many(QUESTIONS)
    again.close()
    assert all(r.ok for r in results) and server.count() == 40  # the ten were not paid again
    assert len(read_calls(run_paths)) == 40


def test_a_paid_answer_that_meets_a_full_disk_waits_for_room_and_is_kept(
    run_paths, tmp_path, server, monkeypatch, capfd
):
    # SQLite's own "database or disk is full": the store may not grow past its current pages
    import threading

    import memcost.calls as calls_module

    # Each connection belongs to one worker thread and is limited in that thread, the next time
    # the store asks for it: a PRAGMA sent from another thread could land inside the worker's
    # own statement and leave it on a stale snapshot ("database is locked").
    connections = []
    limit_of = {}
    full = {"on": False}
    real_connect = calls_module.CallStore._connect

    def connect(self):
        conn = real_connect(self)
        if conn not in limit_of:
            connections.append(conn)
        wanted = "full" if full["on"] else "room"
        if limit_of.get(conn) != wanted:
            pages = conn.execute("PRAGMA page_count").fetchone()[0]
            conn.execute(f"PRAGMA max_page_count = {pages if full['on'] else 1000000}")
            limit_of[conn] = wanted
        return conn

    monkeypatch.setattr(calls_module.CallStore, "_connect", connect)
    monkeypatch.setattr(calls_module, "FULL_DISK_WAIT_S", 60.0)
    client = api_client(run_paths, server.url, tmp_path)
    client.chat(QUESTIONS[0])

    def fill_the_disk():
        full["on"] = True

    def make_room():
        full["on"] = False

    timer = threading.Timer(1.5, make_room)

    arrived = []

    def while_the_first_answers_are_on_the_wire(path, body):
        arrived.append(path)  # (the server's own count takes the lock this rule runs under)
        if len(arrived) == 3:
            fill_the_disk()  # these calls were sent: their answers meet the full disk
            timer.start()
        return False

    server.on(while_the_first_answers_are_on_the_wire, Action(), times=None)
    results = client.chat_many(QUESTIONS[1:30])
    timer.join()
    client.close()
    for conn in connections:  # this test's own too: none left for the collector to close later
        conn.close()
    err = capfd.readouterr().err
    assert "is full: a paid answer, held in memory, waits for up to 60 s" in err
    assert "room again in " in err
    assert all(r.ok for r in results) and server.count() == 30  # each sent once
    records = read_calls(run_paths)
    assert len(records) == 30 and all(answer is not None for _, answer in _rows(run_paths))
    for conn in connections:
        conn.close()


@pytest.fixture
def read_only_share(tmp_path):
    """A folder this process cannot write (a class's share of an instructor's runs): a
    read-only bind mount for root, whom file modes do not stop; file modes for anyone else."""
    import subprocess

    share, view = tmp_path / "share", tmp_path / "view"
    share.mkdir()
    view.mkdir()

    def seal() -> None:
        if os.geteuid() == 0:
            mounted = subprocess.run(["mount", "--bind", str(share), str(view)]).returncode == 0
            if (
                not mounted
                or subprocess.run(["mount", "-o", "remount,ro,bind", str(view)]).returncode
            ):
                pytest.skip("a read-only folder needs a bind mount, which this machine refuses")
        else:
            subprocess.run(["chmod", "-R", "a-w", str(share)], check=True)
            view.rmdir()
            view.symlink_to(share)
        assert not os.access(view, os.W_OK)

    yield share, view, seal
    if os.geteuid() == 0:  # lazily if still busy: a mount left behind blocks pytest's cleanup
        if subprocess.run(["umount", str(view)], capture_output=True).returncode:
            subprocess.run(["umount", "-l", str(view)], capture_output=True)
    else:
        subprocess.run(["chmod", "-R", "u+w", str(share)], check=True)


def test_a_run_on_a_read_only_share_is_read_listed_and_reused(
    paid_run, tmp_path, server, read_only_share, capsys
):
    import shutil

    from memcost.cli import main

    share, view, seal = read_only_share
    shutil.copytree(paid_run.root, share / "teacher")
    (share / "teacher" / "manifest.json").write_text('{"run_name": "teacher", "runs": [{}]}')
    seal()
    teacher = view / "teacher"
    assert len(read_calls(teacher)) == 40
    assert main(["runs", "--dir", str(view)]) == 0
    (row,) = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("teacher")]
    assert "damaged" not in row and "?" not in row  # once "store of calls damaged", cost "?"
    assert main(["report", str(teacher)]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"error: {teacher} cannot be written (a read-only folder)")
    # a student's run is served the instructor's answers from the share: nothing is sent
    student = RunPaths(tmp_path / "student")
    client = api_client(student, server.url, tmp_path, reuse_runs=[str(teacher)])
    results = client.chat_many(QUESTIONS)
    client.close()
    assert all(r.ok for r in results) and server.count() == 0
