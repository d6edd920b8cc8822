"""The Batch API path of the client, through the real ``openai`` SDK against the local server:
submit, wait, put results in the cache and ledger at the batch price; partial failures and
expiry by ``batch_retry``; ``max_wait_hours``; the budget's reservation; refusals."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from fake_api.openai_server import CHAT_PATH, EMBEDDINGS_PATH, FakeOpenAIServer
from llm_helpers import TEST_KEY, api_client, question

from memcost.calls import list_cost, read_calls
from memcost.cli import main
from memcost.io import read_jsonl
from memcost.llm import BudgetExceeded, EmbeddingRequest
from memcost.llm.batch import (
    BatchJournal,
    BatchTransport,
    BatchWaitExceeded,
    Entry,
    Line,
    joined,
    read_answers,
    request_line,
    split_lines,
)
from memcost.paths import RunPaths

FAST = {"batch_poll_s": 0.05}


@pytest.fixture(autouse=True)
def _key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", TEST_KEY)


def _client(tmp_path, server, **options):
    options = {**FAST, "execution": {"read": "batch", "embed": "batch"}, **options}
    return api_client(RunPaths(tmp_path / "run"), server.url, tmp_path, **options)


def test_batch_stage_is_answered_by_one_batch_at_half_the_price(tmp_path):
    with FakeOpenAIServer(api_key=TEST_KEY) as server:
        client = _client(tmp_path, server)
        requests = [question(i) for i in range(6)] + [question(0)]  # one asked twice
        results = client.chat_many(requests)
        assert server.count(CHAT_PATH) == 0  # nothing was sent interactively
        assert server.batches.created == 1 and len(server.batches.ran) == 6
        assert all(r.ok and r.text.startswith("answer-") for r in results)
        assert results[0].text == results[-1].text
        calls = read_calls(client.run.calls)
        paid = [c for c in calls if not c["cached"]]
        assert len(paid) == 6 and all(c["execution"] == "batch" for c in paid)
        cost = sum(list_cost(c) for c in paid)
        full = sum(list_cost({k: v for k, v in c.items() if k != "execution"}) for c in paid)
        assert cost == pytest.approx(full / 2)
        assert client.budget.spent == pytest.approx(cost)
        assert client.stats.batch_calls == 6 and client.stats.batches == 1
        entries = BatchJournal(client.run.root).entries()
        assert [e.status for e in entries] == ["completed"] and len(entries[0].keys) == 6
        # asked again: the cache answers, no new batch
        again = client.chat_many(requests)
        assert [r.text for r in again] == [r.text for r in results]
        assert server.batches.created == 1
        client.close()


def test_embeddings_and_interactive_stages_mix(tmp_path):
    with FakeOpenAIServer(api_key=TEST_KEY) as server:
        client = _client(tmp_path, server)
        vectors = client.embed(["alpha beta", "gamma", ""])
        assert vectors.shape == (3, 1536) and not vectors[2].any()
        assert server.count(EMBEDDINGS_PATH) == 0 and server.batches.created == 1
        client.chat_many([question(1, stage="judge")])  # judge stays interactive here
        assert server.count(CHAT_PATH) == 1 and server.batches.created == 1
        records = read_calls(client.run.calls)
        assert {(c["stage"], c.get("execution")) for c in records} == {
            ("embed", "batch"),
            ("judge", None),
        }
        client.close()


@pytest.mark.parametrize("retry", ["batch", "interactive"])
def test_expiry_and_server_errors_follow_batch_retry(tmp_path, retry):
    with FakeOpenAIServer(api_key=TEST_KEY) as server:
        server.batches.expire_next = 1  # the first batch expires with half of it run ...
        server.batches.fail_once = lambda line: 500 if line["custom_id"] == key1 else None
        client = _client(tmp_path, server, batch_retry=retry)
        requests = [question(i) for i in range(8)]
        key1 = requests[1].key(client.endpoint_for(requests[1].model).identity)
        results = client.chat_many(requests)
        assert all(r.ok for r in results)
        calls = read_calls(client.run.calls)
        batched = [c for c in calls if c.get("execution") == "batch"]
        sent = [c for c in calls if not c.get("execution")]
        if retry == "batch":  # ... and the rest (4 expired, 1 server error) go in a second batch
            assert server.batches.created == 2 and len(batched) == 8 and not sent
            assert server.count(CHAT_PATH) == 0
        else:  # ... or interactively, at the list price
            assert server.batches.created == 1 and len(batched) == 3
            assert server.count(CHAT_PATH) == 5 and len(sent) == 5
        statuses = [e.status for e in BatchJournal(client.run.root).entries()]
        assert statuses[0] == "expired"
        client.close()


def test_a_request_the_batch_rejects_fails_through_its_own_call(tmp_path):
    with FakeOpenAIServer(api_key=TEST_KEY) as server:
        server.batches.fail_once = lambda line: 400
        client = _client(tmp_path, server)
        results = client.chat_many([question(1), question(2)])
        # a 4xx is not re-batched: the stage's own call asks (and here the server answers)
        assert server.batches.created == 1 and server.count(CHAT_PATH) == 2
        assert all(r.ok for r in results)
        client.close()


def _leave_an_open_batch(tmp_path, server, n: int) -> None:
    """A run that submitted one batch of ``n`` questions and stopped waiting for it (the
    server holds it back); the batch finishes as soon as the caller lets it."""
    server.batches.delay_s = 30.0
    client = _client(tmp_path, server, max_wait_hours=0.5 / 3600)
    with pytest.raises(
        BatchWaitExceeded,
        match=r"max_wait_hours=0.000138889.*1 batch\(es\) "
        r"still running \(batch_000001\).*rerun the same command",
    ):
        client.chat_many([question(i) for i in range(n)])
    assert not read_calls(client.run.calls)
    client.close()
    server.batches.delay_s = 0.0


def test_max_wait_hours_stops_cleanly_and_a_rerun_reattaches(tmp_path):
    with FakeOpenAIServer(api_key=TEST_KEY) as server:
        _leave_an_open_batch(tmp_path, server, 3)
        rerun = _client(tmp_path, server)
        results = rerun.chat_many([question(i) for i in range(4)])  # one more than before
        assert all(r.ok for r in results)
        assert server.batches.created == 2  # the open batch re-attached; only the new request
        entries = BatchJournal(rerun.run.root).entries()
        assert [len(e.keys) for e in entries] == [3, 1]
        assert all(e.status == "completed" for e in entries)
        rerun.close()


def test_answers_a_rerun_no_longer_asks_for_are_kept_as_asked(tmp_path, capsys):
    with FakeOpenAIServer(api_key=TEST_KEY) as server:
        _leave_an_open_batch(tmp_path, server, 4)
        rerun = _client(tmp_path, server, progress=True)
        results = rerun.chat_many([question(i) for i in range(2)])  # its parameters changed
        assert all(r.ok for r in results) and server.batches.created == 1
        rerun.close()
        [entry] = BatchJournal(rerun.run.root).entries()
        assert entry.status == "completed"
        assert (entry.extra["completed"], entry.extra["not_asked"], entry.extra["unused"]) == (
            2,
            2,
            0,
        )
        err = capsys.readouterr().err
        assert "batch_000001: 2 of its answers are for requests this call does not send" in err
        records = read_calls(rerun.run.calls)  # all four paid answers, tagged as they were asked
        assert sorted(r["question_id"] for r in records) == ["q0", "q1", "q2", "q3"]
        assert all(r["execution"] == "batch" and not r["cached"] for r in records)
        # a later call that sends the other two is answered from the cache: nothing sent again
        later = _client(tmp_path, server)
        assert all(r.ok for r in later.chat_many([question(i) for i in range(2, 4)]))
        later.close()
        assert server.batches.created == 1 and server.count(CHAT_PATH) == 0


def test_a_batch_recorded_without_its_requests_counts_what_it_cannot_keep(tmp_path, capsys):
    with FakeOpenAIServer(api_key=TEST_KEY) as server:
        _leave_an_open_batch(tmp_path, server, 4)
        for saved in (tmp_path / "run" / "batches").iterdir():
            saved.unlink()  # as a journal written before the requests were kept beside it
        rerun = _client(tmp_path, server, progress=True)
        assert all(r.ok for r in rerun.chat_many([question(i) for i in range(2)]))
        rerun.close()
    [entry] = BatchJournal(rerun.run.root).entries()
    assert (entry.extra["completed"], entry.extra["not_asked"], entry.extra["unused"]) == (2, 0, 2)
    assert len(read_calls(rerun.run.calls)) == 2
    assert "2 answers for requests this call does not send are billed but not used" in (
        capsys.readouterr().err
    )


def test_the_budget_reserves_a_whole_batch_before_submitting(tmp_path):
    with FakeOpenAIServer(api_key=TEST_KEY) as server:
        client = _client(tmp_path, server, max_cost_usd=0.0001)
        requests = [question(i, max_output_tokens=4000) for i in range(20)]
        with pytest.raises(
            BudgetExceeded,
            match="a batch of 20 read requests to "
            r"gpt-5-mini-2025-08-07 \(about \$0\.0\d+ at the batch price\)",
        ):
            client.chat_many(requests)
        assert server.batches.created == 0 and not server.batches.files
        client.close()


def test_batch_is_refused_where_there_is_no_batch_api(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("OPENROUTER_API_KEY", TEST_KEY)
    with pytest.raises(ValueError, match="backend 'openrouter' has none"):
        _client(tmp_path, FakeOpenAIServer(), backend="openrouter")
    routed = _client(
        tmp_path, FakeOpenAIServer(), model_backends={"gpt-5-mini-2025-08-07": "openrouter"}
    )
    with pytest.raises(ValueError, match=r"'openrouter' \(serving gpt-5-mini-2025-08-07\)"):
        routed.chat_many([question(1)])
    routed.close()
    offline = _client(tmp_path, FakeOpenAIServer(), backend="offline")
    assert "batch is ignored by the offline backend" in capsys.readouterr().err
    offline.close()


def test_files_are_split_at_the_limits():
    lines = [
        request_line(f"k{i}", "m", "/v1/chat/completions", {"i": i}, tokens=10) for i in range(7)
    ]
    assert [len(p) for p in split_lines(lines, max_requests=3)] == [3, 3, 1]
    assert [len(p) for p in split_lines(lines, max_tokens=25)] == [2, 2, 2, 1]
    size = len(lines[0].data)
    assert [len(p) for p in split_lines(lines, max_bytes=2 * size + 1)] == [2, 2, 2, 1]
    assert isinstance(lines[0], Line) and json.loads(lines[0].data)["custom_id"] == "k0"


def test_output_and_error_lines_are_read():
    text = (
        "\n".join(
            json.dumps(x)
            for x in [
                {"custom_id": "a", "response": {"status_code": 200, "body": {"choices": []}}},
                {
                    "custom_id": "b",
                    "response": None,
                    "error": {"code": "batch_expired", "message": "x"},
                },
                {
                    "custom_id": "c",
                    "response": {"status_code": 400, "body": {"error": {"message": "no"}}},
                },
            ]
        )
        + "\n{torn"
    )
    a, b, c = read_answers(text)
    assert a.ok and not b.ok and b.retryable and b.message == "batch_expired: x"
    assert not c.retryable and c.message == "HTTP 400: no"


def test_embedding_request_body_in_the_file(tmp_path):
    with FakeOpenAIServer(api_key=TEST_KEY) as server:
        client = _client(tmp_path, server)
        client.embed_many([EmbeddingRequest("text-embedding-3-small", ("one", "two"))])
        line = json.loads(next(iter(server.batches.files.values())).splitlines()[0])
        assert line["url"] == "/v1/embeddings" and line["body"]["input"] == ["one", "two"]
        client.close()


def test_killed_during_the_wait_a_rerun_reattaches_and_creates_no_second_batch(tmp_path):
    """SIGKILL while a batch runs, then rerun: the recorded batch is waited for, not resubmitted
    (the server counts creations), and its results land in the cache, ledger and outputs."""
    run = tmp_path / "run"
    env = {**os.environ, "OPENAI_API_KEY": TEST_KEY}
    command = [sys.executable, str(Path(__file__).with_name("batch_worker.py")), "--run", str(run)]
    with FakeOpenAIServer(api_key=TEST_KEY) as server:
        server.batches.delay_s = 600.0  # far longer than the test: the worker is waiting
        first = subprocess.Popen(
            [*command, "--url", server.url],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        journal = BatchJournal(run)
        deadline = time.monotonic() + 60
        while (
            time.monotonic() < deadline
            and first.poll() is None
            and not any(e.batch_id for e in journal.entries())
        ):
            time.sleep(0.02)
        time.sleep(0.2)  # it polls now
        first.send_signal(signal.SIGKILL)
        assert first.wait(timeout=30) == -signal.SIGKILL
        assert server.batches.created == 1 and not read_calls(run)
        server.batches.delay_s = 0.0  # the batch has finished meanwhile
        second = subprocess.run(
            [*command, "--url", server.url], env=env, timeout=120, capture_output=True, text=True
        )
        assert second.returncode == 0, second.stderr[-2000:]
        assert "re-attached to batch_000001 (40 read requests" in second.stderr
        assert server.batches.created == 1 and server.count(CHAT_PATH) == 0
    records = read_calls(run)
    assert len(records) == 40 and all(
        r["execution"] == "batch" and not r["cached"] for r in records
    )
    answers = read_jsonl(run / "answers.jsonl")
    assert sorted(a["question_id"] for a in answers) == [f"q{i:03d}" for i in range(40)]
    assert [e.status for e in BatchJournal(run).entries()] == ["completed"]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            ["-p", "backend=openrouter", "-p", "client={execution: {judge: batch}}"],
            "execution: batch is the OpenAI Batch API, and backend 'openrouter' has none",
        ),
        (["-p", "client={batch_retry: later}"], "valid choices: batch, interactive"),
    ],
)
def test_the_runner_refuses_batch_settings_before_anything_starts(tmp_path, capsys, extra, message):
    run_dir = tmp_path / "run"
    code = main(
        ["run", "--params", "smoke", "--run-name", str(run_dir), "--datasets", "locomo", *extra]
    )
    err = capsys.readouterr().err
    assert code == 2 and message in err and "Traceback" not in err
    assert not run_dir.exists()


@pytest.mark.parametrize("created", [True, False])
def test_killed_between_upload_and_creation_the_batch_is_found_or_created_once(tmp_path, created):
    """The journal holds the uploaded file but no batch id: a rerun finds the batch made from
    that file (or, when none was made, creates it), and never uploads the requests again."""
    with FakeOpenAIServer(api_key=TEST_KEY) as server:
        client = _client(tmp_path, server)
        requests = [question(i) for i in range(3)]
        endpoint = client.endpoint_for(requests[0].model)
        lines = [client.prefill.line(r.key(endpoint.identity), r) for r in requests]
        transport = BatchTransport(client.transport.client_for(endpoint))
        file_id = transport.upload(joined(lines))
        BatchJournal(client.run.root).uploaded(
            Entry(
                input_file_id=file_id,
                model=lines[0].model,
                url=lines[0].url,
                stage="read",
                endpoint=endpoint.identity,
                keys=[line.key for line in lines],
            )
        )
        if created:
            transport.create(file_id, lines[0].url, {})
        results = client.chat_many(requests)
        assert all(r.ok for r in results) and server.batches.created == 1
        assert len(server.batches.files) == 2  # the one input file and its output
        assert [e.status for e in BatchJournal(client.run.root).entries()] == ["completed"]
        client.close()


def test_a_cancelled_batch_is_batched_again(tmp_path):
    with FakeOpenAIServer(api_key=TEST_KEY) as server:
        server.batches.delay_s = 60.0
        client = _client(tmp_path, server)

        def cancel() -> None:  # as someone cancelling it in the dashboard would
            while not server.batches.batches:
                time.sleep(0.01)
            server.batches.delay_s = 0.0
            server.batches.handle("POST", "/v1/batches/batch_000001/cancel", "", b"")

        threading.Thread(target=cancel, daemon=True).start()
        results = client.chat_many([question(i) for i in range(4)])
        assert all(r.ok for r in results) and server.batches.created == 2
        entries = BatchJournal(client.run.root).entries()
        assert [(e.status, len(e.keys)) for e in entries] == [("cancelled", 4), ("completed", 4)]
        assert {c["execution"] for c in read_calls(client.run.calls)} == {"batch"}
        client.close()


def test_a_batch_wait_prints_signs_of_life(tmp_path, capsys):
    from memcost.io import SIGN_OF_LIFE

    with FakeOpenAIServer(api_key=TEST_KEY) as server:
        client = _client(tmp_path, server, progress=True)
        assert all(r.ok for r in client.chat_many([question(i) for i in range(3)]))
        client.close()
    err = capsys.readouterr().err.replace("\r", "\n")  # a progress bar's redraws end lines
    # a bar may be drawn before the line: what the runner passes on starts at the mark
    lines = [ln[ln.index(SIGN_OF_LIFE) :] for ln in err.splitlines() if SIGN_OF_LIFE in ln]
    assert any(
        ln.startswith(f"{SIGN_OF_LIFE}batch read: ")
        and "requests answered" in ln
        and "results within 24 h" in ln
        for ln in lines
    ), lines


def test_a_batch_the_provider_forgot_stops_in_one_line_and_can_be_given_up(tmp_path, capsys):
    from memcost.cli import main
    from memcost.llm.batch import BatchLost

    with FakeOpenAIServer(api_key=TEST_KEY) as server:
        client = _client(tmp_path, server)
        requests = [question(i) for i in range(3)]
        endpoint = client.endpoint_for(requests[0].model)
        lines = [client.prefill.line(r.key(endpoint.identity), r) for r in requests]
        journal = BatchJournal(client.run.root)
        entry = Entry(
            input_file_id="file-gone",
            model=lines[0].model,
            url=lines[0].url,
            stage="read",
            endpoint=endpoint.identity,
            keys=[ln.key for ln in lines],
        )
        journal.uploaded(entry)
        journal.created(entry, "batch_gone")  # submitted by a run, then lost by the provider
        with pytest.raises(BatchLost) as lost:
            client.chat_many(requests)
        message = str(lost.value)
        assert "no longer knows batch batch_gone (HTTP 404" in message
        assert f"python -m memcost forget-batch {client.run.root} batch_gone" in message
        assert main(["forget-batch", str(client.run.root), "batch_gone"]) == 0
        assert "gave up batch batch_gone (3 requests" in capsys.readouterr().out
        assert main(["forget-batch", str(client.run.root), "batch_gone"]) == 2  # once only
        results = client.chat_many(requests)  # its requests go in a new batch
        assert all(r.ok for r in results) and server.batches.created == 1
        client.close()
    assert [e.status for e in BatchJournal(client.run.root).entries()] == ["forgotten", "completed"]
