"""Crash safety and secrecy, with real processes: SIGKILL mid-run, then rerun; a planted key.

The stage-like worker (tests/llm_worker.py) answers 200 questions through the client against
the local server and appends one output line per answer, skipping answered questions on rerun.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from fake_api.openai_server import Action, FakeOpenAIServer
from llm_helpers import TEST_KEY

from memcost.calls import IN_FLIGHT_AT_KILL, is_paid, read_calls, store_path
from memcost.io import read_jsonl

WORKER = Path(__file__).with_name("llm_worker.py")


def _worker(
    run: Path,
    url: str,
    *extra: str,
    env: dict[str, str] | None = None,
    log: Path | None = None,
) -> subprocess.Popen:
    out = open(log, "a") if log else subprocess.DEVNULL  # noqa: SIM115 - closed with the process
    return subprocess.Popen(
        [
            sys.executable,
            str(WORKER),
            "--run",
            str(run),
            "--url",
            url,
            *extra,
        ],
        stdout=out,
        stderr=out,
        env={**os.environ, **(env or {})},
    )


def _settle(server, quiet_s: float = 0.3, limit_s: float = 5.0) -> None:
    """Wait until the server has logged no new request for ``quiet_s``: a request the killed
    worker sent just before the kill may still be in the server's hands (its latency is 30 ms),
    and logged only after the test has cleared the log for the rerun."""
    deadline = time.monotonic() + limit_s
    seen = server.count()
    while time.monotonic() < deadline:
        time.sleep(quiet_s)
        if server.count() == seen:
            return
        seen = server.count()


def test_sigkill_midway_then_rerun_sends_only_what_had_not_completed(tmp_path):
    run = tmp_path / "run"
    with FakeOpenAIServer(latency_s=0.03) as server:
        first = _worker(run, server.url)
        deadline = time.monotonic() + 60
        while server.count() < 70 and time.monotonic() < deadline and first.poll() is None:
            time.sleep(0.002)
        first.send_signal(signal.SIGKILL)
        assert first.wait(timeout=30) == -signal.SIGKILL
        _settle(server)  # requests the killed process had on the wire are logged before clear()
        sent_first = server.count()
        assert 70 <= sent_first < 200, "the kill must land midway"

        completed = {_question(e) for e in _stored_texts(run)}
        ledger_before = read_calls(run)
        answered = [r for r in ledger_before if r["error"] is None]
        assert len(answered) == len(completed) < 200  # each record with its answer
        # the calls on the wire at the kill: on the ledger as possibly billed (the provider saw
        # them), prompt tokens counted, for questions that have no answer
        on_the_wire = [r for r in ledger_before if r["error"] == IN_FLIGHT_AT_KILL]
        assert len(on_the_wire) == len(ledger_before) - len(answered)
        assert len(on_the_wire) >= sent_first - len(completed) >= 1
        assert all(is_paid(r) and r["prompt_tokens"] > 0 for r in on_the_wire)
        assert not {r["question_id"][1:] for r in on_the_wire} & completed

        server.clear()
        second = _worker(run, server.url)
        assert second.wait(timeout=120) == 0

        resent = [_question_from_body(r.body) for r in server.requests]
        assert len(resent) == len(set(resent)), "a request was sent twice by the rerun"
        assert set(resent) == {f"{i:03d}" for i in range(200)} - completed
        assert len(resent) == 200 - len(completed)

    records = read_calls(run)
    answers = [r for r in records if r["error"] is None]
    assert len(answers) == 200 and len(records) == 200 + len(on_the_wire)
    assert len({r["request_hash"] for r in answers}) == 200
    assert len({r["question_id"] for r in answers}) == 200
    # every answer was paid by this run once; the calls killed on the wire stay on the bill
    assert all(r["cached"] is False for r in records)
    assert [r for r in records if r["error"]] == on_the_wire
    outputs = read_jsonl(run / "answers.jsonl")
    assert sorted(o["question_id"] for o in outputs) == [f"q{i:03d}" for i in range(200)]
    texts = {_question(t): t for t in _stored_texts(run)}
    assert all(texts[o["question_id"][1:]] == o["answer"] for o in outputs)


def _stored_texts(run: Path) -> list[str]:
    """The answers in the run's store of calls."""
    with sqlite3.connect(store_path(run)) as conn:
        rows = conn.execute("SELECT answer FROM calls WHERE answer IS NOT NULL").fetchall()
    return [json.loads(a)["text"] for (a,) in rows]


def _question(answer_text: str) -> str:
    # the server's reply quotes the question: "answer-xxxx: Question number 17: reply in JSON."
    return f"{int(answer_text.split('Question number ')[1].split(':')[0]):03d}"


def _question_from_body(body: dict) -> str:
    return f"{int(body['messages'][-1]['content'].split('Question number ')[1].split(':')[0]):03d}"


def test_a_planted_key_appears_in_no_file_the_run_writes(tmp_path):
    key = TEST_KEY + "-planted-" + os.urandom(6).hex()
    run = tmp_path / "run"
    log = run / "logs" / "worker.log"
    log.parent.mkdir(parents=True)
    with FakeOpenAIServer(api_key=key) as server:
        # some trouble on the way: retries, a malformed body, and a refused call at the end
        server.script(
            Action(status=500), Action(status=429, retry_after="0"), Action(malformed=True)
        )
        server.on(lambda p, b: "refused" in str(b), Action(status=401), times=None)
        worker = _worker(
            run,
            server.url,
            "--n",
            "20",
            "--backend",
            "openai",
            "--fail-401",
            env={"OPENAI_API_KEY": key},
            log=log,
        )
        assert worker.wait(timeout=120) == 0, log.read_text()
        assert all(
            r.authorized for r in server.requests if r.status != 401 or "refused" in str(r.body)
        )
        assert server.count() >= 23
    text = log.read_text()
    assert "set OPENAI_API_KEY (or use the offline backend)" in text  # the 401 was reported
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    names = {p.name for p in written}
    assert {"calls.sqlite", "manifest.json", "answers.jsonl", "worker.log"} <= names
    for path in written:
        data = path.read_bytes()
        assert key.encode() not in data, f"the key leaked into {path}"
        assert key[-12:].encode() not in data, f"part of the key leaked into {path}"
