"""The API path of notebooks 00-05 twice, through the CLI against the local server posing as
OpenAI (``backend: openai`` with its ``base_url``): once all interactive, once with extraction
and judging sent through the Batch API. Everything but cost and timing must match; the batched
run's ledger prices the batched stages at half.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest
import yaml
from fake_api.openai_server import CHAT_PATH, FakeOpenAIServer
from fake_api.stages import is_reask, stage_of, stage_server

from memcost.calls import list_cost, read_calls
from memcost.io import read_jsonl
from memcost.llm.batch import BatchJournal
from memcost.params import notebook_parameters
from memcost.paths import REPO_ROOT, RunPaths
from memcost.run import discover_notebooks

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

DATASET = "locomo"
KEY_ENV = "MEMCOST_TEST_API_KEY"
KEY = "sk-memcost-fake-" + "batch-0123456789"
BATCHED = {"extract": "batch", "judge": "batch"}
PARAMETERS = {
    "include_no_context": False,
    "include_oracle": False,
    "judge_prompts": ["judge"],
    "figure1_grid": {"points": 13},
    "max_turns": 20,
    "growing_conversation": {"turns": 20},
    "models": ["gpt-5-mini-2025-08-07"],  # OpenAI's models only: the server poses as OpenAI
    "client": {"batch_poll_s": 0.2},
}
STEPS = ["00", "01", "02", "03", "04", "05"]
SYSTEMS = ["memory_mem0_style", "long_context_gpt-5-mini", "rolling_window_gpt-5-mini"]
# What may differ between the two runs: how long calls took, what the prompt cache held, and what
# names the endpoint (each run has its own server): the request hash and the settings' fingerprint.
TIMING = {
    "latency_s",
    "search_latency_s",
    "cached_prompt_tokens",
    "cached",
    "attempts",
    "request_hash",
    "fingerprint",
}


@dataclass
class Run:
    paths: RunPaths
    output: str
    server: FakeOpenAIServer


def _preset(folder: Path) -> Path:
    notebooks = discover_notebooks()
    declared = set().union(*(notebook_parameters(notebooks[s]) for s in STEPS))
    path = folder / "preset.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "description": "Batch API path test",
                "datasets": [DATASET],
                "steps": STEPS,
                "parameters": {k: v for k, v in PARAMETERS.items() if k in declared},
            }
        ),
        encoding="utf-8",
    )
    return path


def _start(preset: Path, root: Path, server: FakeOpenAIServer, *overrides: str):
    env = {**os.environ, KEY_ENV: KEY, "MEMCOST_CACHE_DIR": str(root.parent / f"{root.name}-cache")}
    env.pop("OPENAI_API_KEY", None)
    command = [
        sys.executable,
        "-m",
        "memcost",
        "run",
        "--params",
        str(preset),
        "--run-name",
        str(root),
        "--quiet",
        "-p",
        "backend=openai",
        "-p",
        f"base_url={server.url}",
        "-p",
        f"client={{api_key_env: {KEY_ENV}}}",
        *[a for o in overrides for a in ("-p", o)],
    ]
    log = open(f"{root}.log", "w", encoding="utf-8")  # noqa: SIM115 - closed below
    # A session of its own: a kernel the other run interrupts at its shutdown is never this one's.
    return subprocess.Popen(
        command,
        cwd=REPO_ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    ), log


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Run]:
    tmp = tmp_path_factory.mktemp("batch-api")
    preset = _preset(tmp)
    servers = {
        "interactive": stage_server(api_key=KEY).start(),
        "batch": stage_server(api_key=KEY).start(),
    }
    started = {}
    try:
        for name, server in servers.items():
            extra = [f"client={{execution: {BATCHED}}}"] if name == "batch" else []
            started[name] = _start(preset, tmp / name, server, *extra)
        out = {}
        for name, (process, log) in started.items():
            process.wait(timeout=800)
            log.close()
            output = Path(f"{tmp / name}.log").read_text(encoding="utf-8")
            assert process.returncode == 0, output[-3000:]
            out[name] = Run(RunPaths(tmp / name), output, servers[name])
        yield out
    finally:
        for process, _ in started.values():
            if process.poll() is None:
                process.kill()
        for server in servers.values():
            server.stop()


def _rows(path: Path, keys: tuple[str, ...]) -> dict[tuple, dict]:
    return {
        tuple(r[k] for k in keys): {f: v for f, v in r.items() if f not in TIMING}
        for r in read_jsonl(path)
    }


def _differences(left: dict[tuple, dict], right: dict[tuple, dict]) -> dict[str, tuple]:
    """Field → (an item, its two values), for every field on which some item differs."""
    assert left.keys() == right.keys()
    out = {}
    for item, row in left.items():
        for name in set(row) | set(right[item]):
            if row.get(name) != right[item].get(name):
                out.setdefault(name, (item, row.get(name), right[item].get(name)))
    return out


def test_batched_run_gives_the_same_memory_answers_and_judgments(runs):
    a, b = (runs[n].paths.dataset(DATASET) for n in ("interactive", "batch"))
    key = ("system", "question_id", "prompt_name", "vote")
    judgments = _rows(a.judgments, key)
    assert judgments and _differences(judgments, _rows(b.judgments, key)) == {}
    for system in SYSTEMS:
        assert (
            _differences(
                _rows(a.answers_file(system), ("question_id",)),
                _rows(b.answers_file(system), ("question_id",)),
            )
            == {}
        ), system
    for name in ("facts.parquet", "segments.parquet"):
        left, right = (pd.read_parquet(d.memory / name) for d in (a, b))
        pd.testing.assert_frame_equal(
            left.drop(columns=list(TIMING & set(left)), errors="ignore"),
            right.drop(columns=list(TIMING & set(right)), errors="ignore"),
        )


def test_batched_stages_went_through_the_batch_api_at_half_the_price(runs):
    run = runs["batch"]
    sent = Counter(
        stage_of(r.body or {})
        for r in run.server.requests
        if r.path == CHAT_PATH and not is_reask(r.body or {})
    )
    assert sent["extract"] == sent["judge"] == 0  # only re-asks were sent interactively
    assert sent["update"] > 0 and sent["read"] > 0 and sent["long_context"] > 0
    journal = BatchJournal(run.paths.root).entries()
    assert journal and {e.status for e in journal} == {"completed"}
    assert {e.stage for e in journal} == {"extract", "judge"}
    assert run.server.batches.created == len(journal)
    calls = read_calls(run.paths.calls)
    paid = [c for c in calls if not c["cached"] and not c["error"]]
    batched = [c for c in paid if c.get("execution") == "batch"]
    assert {c["stage"] for c in batched} == {"extract", "judge"}
    assert not [
        c
        for c in paid
        if c["stage"] in BATCHED and not c.get("reask") and c.get("execution") != "batch"
    ]
    half = sum(list_cost(c) for c in batched)
    full = sum(list_cost({k: v for k, v in c.items() if k != "execution"}) for c in batched)
    assert half == pytest.approx(full / 2) and half > 0


def test_both_ledgers_hold_the_same_calls(runs):
    def calls(run: Run) -> Counter:
        return Counter(
            (
                c["stage"],
                c["prompt_version"],
                c["sample_index"],
                c["question_id"],
                c["conversation_id"],
                c["system"],
                c["prompt_tokens"],
            )
            for c in read_calls(run.paths.calls)
            if not c["error"]
        )

    assert calls(runs["interactive"]) == calls(runs["batch"])
