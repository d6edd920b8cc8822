"""A server that never answers is no longer silent for minutes: the timeout is a shared
parameter (settable from a preset), and a line reports requests in flight and the oldest's age."""

from __future__ import annotations

import io
import json
import re

from fake_api.openai_server import Action, FakeOpenAIServer
from llm_helpers import TEST_KEY, api_client, question

from memcost.llm.scheduler import Heartbeat
from memcost.params import ClientSettings, notebook_parameters, shared_params
from memcost.run import discover_notebooks


def test_request_timeout_s_is_a_client_setting_of_every_model_notebook():
    assert ClientSettings.model_fields["request_timeout_s"].default == 0.0
    notebooks = discover_notebooks()
    for step in ("01", "02", "03", "04"):
        declared = notebook_parameters(notebooks[step])
        assert declared["client"]["inferred_type_name"] == "dict", step
        assert declared["price_overrides"]["inferred_type_name"] == "dict", step
    assert shared_params({"client": {"request_timeout_s": 7.5}, "other": 1}) == {
        "request_timeout_s": 7.5
    }


def test_a_silent_server_times_out_at_the_parameter_and_a_heartbeat_reports_it(
    run_paths, tmp_path, monkeypatch
):
    monkeypatch.setenv("OPENAI_API_KEY", TEST_KEY)
    with FakeOpenAIServer(api_key=TEST_KEY) as server:
        server.on(lambda path, body: True, Action(delay_s=2.0), times=None)
        client = api_client(
            run_paths,
            server.url,
            tmp_path,
            max_retries=1,
            **shared_params({"client": {"request_timeout_s": 0.5}}),
        )
        client.items.heartbeat = {"every_s": 0.2, "slow_s": 0.3, "out": io.StringIO()}
        assert client.config.request_timeout_s == 0.5
        results = client.chat_many([question(1), question(2)])
        client.close()
    assert all(r.error and "timeout" in r.error for r in results)
    assert all(r.attempts == 2 for r in results)


def test_the_heartbeat_line_counts_requests_in_flight_and_the_oldest_age():
    import threading
    import time

    out = io.StringIO()
    release = threading.Event()
    first = "judge locomo: 3 requests in flight, the oldest for "
    with Heartbeat("judge locomo", timeout_s=300, every_s=0.1, slow_s=0.2, out=out) as beat:
        work = beat.track(lambda item: release.wait(5))
        threads = [threading.Thread(target=work, args=(i,)) for i in range(3)]
        for t in threads:
            t.start()
        deadline = time.monotonic() + 5  # the lines while all three wait (a busy machine is slow)
        while not any(line.startswith(first) for line in beat.lines):
            assert time.monotonic() < deadline, f"no line with three in flight: {beat.lines}"
            time.sleep(0.05)
        seen = list(beat.lines)
        release.set()
        for t in threads:
            t.join()
    three = [line for line in seen if line.startswith(first)]
    assert three[-1].endswith("s (request_timeout_s=300)"), three
    assert beat.status() is None  # nothing in flight any more


def test_each_call_in_flight_counts_whatever_the_ids_of_its_thread_and_item(monkeypatch):
    # a call was keyed by id(thread) ^ id(item): two calls whose ids gave the same key (here the
    # same item, and threads that report themselves as one) counted once, and the heartbeat of
    # a busy run showed two requests in flight where three were
    import threading

    release, started = threading.Event(), threading.Barrier(3)
    beat = Heartbeat("judge locomo", timeout_s=300, every_s=60, slow_s=0)
    one = threading.current_thread()
    monkeypatch.setattr(threading, "current_thread", lambda: one)
    item = object()
    work = beat.track(lambda _: (started.wait(5), release.wait(5)))
    threads = [threading.Thread(target=work, args=(item,)) for _ in range(2)]
    for t in threads:
        t.start()
    started.wait(5)
    assert beat.status().startswith("judge locomo: 2 requests in flight, the oldest for ")
    release.set()
    for t in threads:
        t.join()
    assert beat.status() is None


def test_the_default_timeout_is_sized_to_the_model_and_the_prompt(run_paths, tmp_path, monkeypatch):
    from memcost.catalog import TIMEOUT_MAX_S, declare_model, model_info, request_timeout
    from memcost.llm import ChatRequest, EmbeddingRequest
    from memcost.text import count_tokens

    # 60 s + prompt / 5,000 tok/s + output / 50 tok/s, the reading and writing x3 if it reasons
    assert request_timeout(model_info("gpt-5-mini"), 2_000, None) == 307.0  # 60 + 3 x 82.32
    assert request_timeout(model_info("gpt-5-mini"), 100_000, 2_000) == 240.0  # 60 + 3 x (20 + 40)
    assert request_timeout(model_info("gpt-6.1-terra"), 900_000, None) == 845.8
    assert request_timeout(model_info("gpt-4o-mini"), 2_000, 1_000) == 80.4  # no reasoning
    assert request_timeout(model_info("text-embedding-3-small"), 300_000, 0) == 120.0
    slow = declare_model("llama3.1:8b", {"output_tokens_per_s": 2})
    assert request_timeout(slow, 1_000, 4_096) == 2_108.2
    assert request_timeout(slow, 1_000, 100_000) == TIMEOUT_MAX_S

    monkeypatch.setenv("OPENAI_API_KEY", TEST_KEY)
    with FakeOpenAIServer(api_key=TEST_KEY) as server:
        sized = api_client(run_paths, server.url, tmp_path, request_timeout_s=0)
        fixed = api_client(run_paths, server.url, tmp_path, request_timeout_s=42)
        text = "word " * 2_000
        chat = ChatRequest(
            "gpt-5-mini-2025-08-07",
            (("user", text),),
            stage="read",
            prompt_version="test@v1",
            reasoning_effort="medium",
        )
        embed = EmbeddingRequest("text-embedding-3-small", (text,))
        tokens = count_tokens(text)
        assert 1_990 < tokens < 2_010
        expected = request_timeout(model_info("gpt-5-mini"), tokens, None)
        assert sized.transport.timeout_for(chat) == expected
        assert 306 < sized.transport.timeout_for(chat) < 308
        assert sized.transport.timeout_for(embed) == round(60 + tokens / 5_000, 1)
        assert fixed.transport.timeout_for(chat) == fixed.transport.timeout_for(embed) == 42
        sized.close()
        fixed.close()


def test_a_rate_limited_wait_says_so_while_it_waits(run_paths, tmp_path, monkeypatch, capsys):
    from memcost.io import SIGN_OF_LIFE

    monkeypatch.setenv("OPENAI_API_KEY", TEST_KEY)
    with FakeOpenAIServer(api_key=TEST_KEY) as server:
        server.script(Action(status=429, retry_after_ms=50))
        client = api_client(run_paths, server.url, tmp_path)
        assert client.chat(question(1)).ok
        client.close()
    err = capsys.readouterr().err
    assert (
        f"{SIGN_OF_LIFE}rate limited (HTTP 429) on gpt-5-mini-2025-08-07: its requests wait "
        "0.05 s, then leave one by one"
    ) in err


def test_requests_waiting_out_a_429_are_not_called_in_flight(run_paths, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", TEST_KEY)
    out = io.StringIO()
    with FakeOpenAIServer(api_key=TEST_KEY) as server:
        # every request of the stage is told to come back in 1 s once: its first attempt, so a
        # request whose first attempt a busy machine delays past another's retry is not told
        # twice (a rule of six 429s for whichever came first once failed one request thrice)
        told: set[str] = set()

        def first_attempt(path: str, body: dict) -> bool:
            asked = json.dumps(body.get("messages"), sort_keys=True)
            if asked in told:
                return False
            told.add(asked)
            return True

        server.on(first_attempt, Action(status=429, retry_after="1"), times=None)
        client = api_client(
            run_paths,
            server.url,
            tmp_path,
            max_retries=2,
            max_concurrency=6,
        )
        client.items.heartbeat = {"every_s": 0.2, "slow_s": 0.3, "out": out}
        results = client.chat_many([question(i) for i in range(6)])
        client.close()
    assert all(r.ok for r in results) and server.count() == 12
    lines = out.getvalue().splitlines()
    waiting = [line for line in lines if "waiting out HTTP 429 (rate limited)" in line]
    assert waiting, lines
    # while they wait (for the 429's 1 s, or behind the hold it put on the model), none of the
    # six is said to be in flight: a line's requests in flight and waiting add up to at most
    # six (on a busy machine a line may come while all six are still on the wire, before the
    # 429s arrive: they are in flight then)
    assert any("no request in flight; " in line for line in waiting), waiting
    for line in waiting:
        counts = [int(n) for n in re.findall(r"(?:: |; )(\d+) ", line)]
        assert sum(counts) <= 6, line


def test_a_long_stage_tells_the_runner_its_progress_bar_once_a_minute(tmp_path, monkeypatch):
    """Without --verbose a notebook's output goes to its log only: a stage of hours would leave
    the terminal silent. The bar's state reaches the runner, at most once every minute."""
    from memcost.io import PROGRESS_FILE, PROGRESS_LABEL, Bar

    told = tmp_path / "progress.log"
    monkeypatch.setenv(PROGRESS_FILE, str(told))
    monkeypatch.setenv(PROGRESS_LABEL, "[locomo] ")
    bar = Bar(total=400, desc="judge gpt-5-mini", unit="req", file=io.StringIO(), mininterval=0)
    start = bar.start_t
    now = [start]
    bar._time = lambda: now[0]
    for done in range(1, 301):
        now[0] = start + done * 0.5  # two votes a second: 150 s for 300 votes
        bar.update(1)
    # tqdm's own line but for its bar, drawn to the width of a terminal the line would overrun
    assert told.read_text().splitlines() == [
        "[locomo] judge gpt-5-mini:  30% 120/400 [01:00<02:20,  2.00req/s]",
        "[locomo] judge gpt-5-mini:  60% 240/400 [02:00<01:20,  2.00req/s]",
    ]
    bar.close()
    monkeypatch.delenv(PROGRESS_FILE)  # not under a runner: nothing told
    with Bar(total=2, file=io.StringIO(), mininterval=0) as quiet:
        quiet.every_s = 0
        quiet.update(2)
    assert len(told.read_text().splitlines()) == 2


def test_a_progress_bar_draws_on_a_terminal_that_reports_no_width():
    """A kernel measures the terminal it inherited; a pseudo-terminal of 0 columns (some
    containers and CI jobs) made tqdm draw nothing: no bar in the notebook, the log or the
    runner's progress lines."""
    import os
    import pty
    import subprocess
    import sys

    from memcost.io import BAR_SIZE

    leader, follower = pty.openpty()  # a new pseudo-terminal reports 0 rows and 0 columns
    code = (
        "from memcost.llm.scheduler import ProgressBar\n"
        "bar = ProgressBar(10, 'judge', lambda: 'hits=0')\n"
        "for _ in range(10): bar.update()\n"
        "bar.close()\n"
    )
    subprocess.run([sys.executable, "-c", code], stderr=follower, check=True, timeout=60)
    os.close(follower)
    drawn = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the terminal closed: all of it read
            break
        if not chunk:
            break
        drawn += chunk
    os.close(leader)
    last = drawn.decode().replace("\r\n", "\n").split("\r")[-1].strip("\n")
    assert last.startswith("judge: 100%|") and "| 10/10 [" in last
    assert len(last) <= BAR_SIZE["ncols"]


def test_a_paid_runs_eta_is_the_estimates_time_not_the_mean_of_notebook_00(tmp_path):
    """After notebook 00's few seconds, the mean time of the notebooks done promised the rest of
    a run of hours in a minute. A paid run's ETA counts each paid notebook at the estimate's
    time; a batch's time is unknown, and said so."""
    import math

    import pandas as pd

    from memcost.run.runner import Progress, discover_notebooks, planned_seconds

    notebooks = discover_notebooks()
    estimate = pd.DataFrame(
        {
            "dataset": ["locomo"] * 5,
            "stage": ["write", "write", "read", "long_context", "judge"],
            "minutes": [30.0, 6.0, 20.0, 90.0, math.nan],  # the judge's votes go in a batch
        }
    )
    planned = planned_seconds(estimate, notebooks)
    assert planned.keys() == {
        "01_extract_facts [locomo]",
        "02_answer_from_memory [locomo]",
        "03_answer_long_context [locomo]",
        "04_judge_answers [locomo]",
    }
    assert planned["01_extract_facts [locomo]"] == 36 * 60
    assert math.isnan(planned["04_judge_answers [locomo]"])

    terminal = io.StringIO()
    progress = Progress(tmp_path, 7, terminal=terminal)  # 00-04, then 05 and 07
    progress.plan(planned)
    progress.finish("00_prepare_data [locomo]", "ok", 4.0)
    progress.finish("01_extract_facts [locomo]", "ok", 1800.0)
    progress.log.close()
    lines = terminal.getvalue().splitlines()
    # 36 + 20 + 90 minutes planned, 05 and 07 at notebook 00's 4 s each, the judge's batch unknown
    assert lines[0].endswith("(elapsed 0:00, ETA ~2:26:08 plus batches)")
    assert lines[1].endswith(", ETA ~1:50:08 plus batches)")
