"""The API path end to end: notebooks 00-05 on LoCoMo against a local OpenAI-compatible server.

What a user with a key runs (``backend: custom``, ``base_url``, the key in the variable that
``api_key_env`` names), through the CLI, against :func:`fake_api.stages.stage_server`:
replies in every stage's format, some malformed (re-asks), one 429 and one 500 (retries),
usage with reasoning tokens and a simulated prompt cache. Then the same run again (resume), a
new run replaying the cache (``replay_only``), and a run that hits its budget.

Everything runs once, in a module fixture, each run a ``python -m memcost run`` process as a
user's would be; a run starts as soon as what it needs exists, so that two cores stay busy and
the whole takes under a minute. LoCoMo because its conversations have many questions each: the
long-context prefix is cached from the second question on, and two long-context models giving
the same answer make the judge's second request a cache hit within the run.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import pytest
import yaml
from fake_api.openai_server import (
    CHAT_PATH,
    EMBEDDINGS_PATH,
    FakeOpenAIServer,
    Received,
)
from fake_api.stages import stage_of, stage_server

from memcost import costs
from memcost.calls import read_calls, record_call_key, store_path
from memcost.catalog import model_info
from memcost.cli import run_status
from memcost.costs.ledger import MEASURED
from memcost.io import read_json, read_jsonl
from memcost.params import notebook_parameters
from memcost.paths import REPO_ROOT, RunPaths
from memcost.run import discover_notebooks

# a hang guard; notebook executions are slow on a busy 2-core machine
pytestmark = pytest.mark.timeout(600)

DATASET = "locomo"
KEY_ENV = "MEMCOST_TEST_API_KEY"
KEY = "sk-memcost-fake-0f3a9c1e5b7d2468ace"
BUDGET_USD = 0.002  # less than notebook 01 costs on LoCoMo (about $0.004)
# Parameters of the run (the smoke preset's, trimmed where the smoke run only adds volume).
PARAMETERS = {
    "include_no_context": False,
    "include_oracle": False,
    "judge_prompts": ["judge"],
    "figure1_grid": {"points": 13},  # 05: figures of the paper's model, not what is tested here
    "max_turns": 20,
    "growing_conversation": {"turns": 20},
}
STEPS_ALL = ["00", "01", "02", "03", "04", "05"]
STEPS_MODEL = ["01", "02", "03", "04"]  # the notebooks that call models
SYSTEMS = [
    "memory_mem0_style",
    "long_context_gpt-5-mini",
    "long_context_gpt-oss-120b",
    "rolling_window_gpt-5-mini",
]


@dataclass
class Run:
    """One CLI invocation and what it left."""

    paths: RunPaths
    returncode: int
    output: str  # stdout and stderr
    requests: list[Received] = field(default_factory=list)  # what the server got meanwhile


def _preset(folder: Path, name: str, steps: list[str]) -> Path:
    """A preset for ``steps`` with the parameters those notebooks declare."""
    notebooks = discover_notebooks()
    declared = set().union(*(notebook_parameters(notebooks[s]) for s in steps))
    path = folder / f"{name}.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "description": f"API path test: {name}",
                "datasets": [DATASET],
                "steps": steps,
                "parameters": {k: v for k, v in PARAMETERS.items() if k in declared},
            }
        ),
        encoding="utf-8",
    )
    return path


def _start(
    preset: Path, run_dir: Path, server: FakeOpenAIServer, *overrides: str
) -> subprocess.Popen:
    """``python -m memcost run`` as a user would type it; its output goes to ``<run>.log``."""
    env = {**os.environ, KEY_ENV: KEY}
    env.pop("OPENAI_API_KEY", None)
    command = [
        sys.executable,
        "-m",
        "memcost",
        "run",
        "--params",
        str(preset),
        "--run-name",
        str(run_dir),
        "--quiet",
        "-p",
        "backend=custom",
        "-p",
        f"base_url={server.url}",
        "-p",
        f"client={{api_key_env: {KEY_ENV}}}",
        *[a for o in overrides for a in ("-p", o)],
    ]
    with open(f"{run_dir}.log", "w", encoding="utf-8") as log:  # a file never fills up
        process = subprocess.Popen(
            command, cwd=REPO_ROOT, env=env, stdout=log, stderr=subprocess.STDOUT
        )
    STARTED.append(process)
    return process


def _finish(process: subprocess.Popen, run_dir: Path) -> Run:
    process.wait(timeout=200)
    return Run(
        RunPaths(run_dir), process.returncode, Path(f"{run_dir}.log").read_text(encoding="utf-8")
    )


STARTED: list[subprocess.Popen] = []  # stopped when the fixture ends, whatever happened


@dataclass
class World:
    first: Run
    resumed: Run
    replay: Run
    budget: Run
    server: FakeOpenAIServer
    cache: Path
    first_files: dict[str, bytes]  # the hand-over files after the first run
    first_manifest: dict  # the manifest after the first run (the resume updates it)


def _files(root: Path) -> dict[str, bytes]:
    """The hand-over files of a run (what later notebooks and the report read)."""
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.suffix in (".jsonl", ".parquet", ".faiss", ".csv")
    }


def _wait_for(path: Path, process: subprocess.Popen, run_dir: Path) -> None:
    """Until ``path`` exists (a notebook's metrics file: it has finished)."""
    while not path.is_file():
        if process.poll() is not None:
            output = Path(f"{run_dir}.log").read_text(encoding="utf-8")
            pytest.fail(f"the run ended before {path.name} was written:\n{output[-3000:]}")
        time.sleep(0.1)


def _seed(source: RunPaths, run_dir: Path) -> None:
    """Start a run from another run's prepared data (notebook 00 calls no model)."""
    shutil.copytree(source.dataset(DATASET).data, run_dir / DATASET / "data")


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> World:
    tmp = tmp_path_factory.mktemp("api")
    server = stage_server(api_key=KEY).start()
    budget_server = stage_server(api_key=KEY).start()
    first_paths = RunPaths(tmp / "first")
    metrics = first_paths.dataset(DATASET).metrics
    try:
        # Runs start as soon as what they need exists, to keep both cores busy: beside the first
        # run, once its data are prepared, a run whose budget is too small for notebook 01; once
        # its answers are judged (05 makes no call), a new run that may only replay the cache.
        first = _start(_preset(tmp, "first", STEPS_ALL), first_paths.root, server)
        _wait_for(metrics / "00_prepare_data.json", first, first_paths.root)
        _seed(first_paths, tmp / "budget")
        budget = _start(
            _preset(tmp, "budget", ["01", "02"]),
            tmp / "budget",
            budget_server,
            f"max_cost_usd={BUDGET_USD}",
        )
        _wait_for(metrics / "04_judge_answers.json", first, first_paths.root)
        seen = len(server.requests)  # from here on, every request is a failure of the test
        _seed(first_paths, tmp / "replay")
        replay = _start(
            _preset(tmp, "replay", STEPS_MODEL),
            tmp / "replay",
            server,
            f"client={{api_key_env: {KEY_ENV}, cache_mode: replay_only, "
            f"reuse_runs: [{first_paths.root}]}}",
        )
        first_run = _finish(first, first_paths.root)
        assert first_run.returncode == 0, first_run.output[-3000:]
        first_run.requests = server.requests[:seen]
        first_files = _files(first_run.paths.root)
        first_manifest = read_json(first_run.paths.manifest)

        # The same run again: nothing is left to do.
        resumed = _start(_preset(tmp, "resume", STEPS_MODEL), first_paths.root, server)
        resumed_run = _finish(resumed, first_paths.root)
        replay_run = _finish(replay, tmp / "replay")
        for run in (resumed_run, replay_run):
            assert run.returncode == 0, run.output[-3000:]
            run.requests = server.requests[seen:]
        budget_run = _finish(budget, tmp / "budget")
        budget_run.requests = budget_server.requests
        yield World(
            first_run,
            resumed_run,
            replay_run,
            budget_run,
            server,
            tmp,
            first_files,
            first_manifest,
        )
    finally:
        for process in STARTED:
            if process.poll() is None:
                process.kill()
                process.wait()
        server.stop()
        budget_server.stop()


# ---------------------------------------------------------------------------------------------
# The first run
# ---------------------------------------------------------------------------------------------
def test_every_stage_reached_the_server_and_misbehaviour_was_survived(world):
    received = Counter((r.path, stage_of(r.body or {}), r.status) for r in world.first.requests)
    for stage in ("extract", "update", "read", "long_context", "judge"):
        assert received[(CHAT_PATH, stage, 200)] > 0, stage
    assert received[(EMBEDDINGS_PATH, None, 200)] > 0
    assert received[(CHAT_PATH, "extract", 429)] == 1
    assert received[(CHAT_PATH, "long_context", 500)] == 1
    assert all(r.authorized for r in world.first.requests)
    # GPT-5 bodies carry the family's parameters only (the server would answer 400)
    assert not [r for r in world.first.requests if r.status == 400]
    for r in world.first.requests:
        if r.path == CHAT_PATH and model_info(r.body["model"]).family == "gpt-5":
            assert "temperature" not in r.body and "max_tokens" not in r.body
            assert r.body["reasoning_effort"] in ("low", "medium", "high")
        elif r.path == CHAT_PATH:
            assert r.body["temperature"] == 0 and r.body["max_tokens"] == 2000


def test_ledger_records_every_call_once_as_custom(world):
    run = world.first.paths
    calls = read_calls(run.calls)
    sent = [r for r in world.first.requests if r.status == 200]
    assert len(calls) >= len(sent)  # the rest were served by the disk cache
    assert {c["backend"] for c in calls} == {"custom"}
    assert {c["provider"] for c in calls} == {f"127.0.0.1:{world.server.port}"}
    assert {c["dataset"] for c in calls} == {DATASET}
    assert not [c for c in calls if c["error"]]
    keys = Counter(record_call_key(c) for c in calls)
    assert max(keys.values()) == 1  # no call recorded twice
    # as many paid records as answered requests; the other records are cache hits
    assert sum(not c["cached"] for c in calls) == len(sent)
    stages = Counter(c["stage"] for c in calls if not c.get("reask"))
    # what the output files imply
    answers = {s: read_jsonl(run.dataset(DATASET).answers_file(s)) for s in SYSTEMS}
    questions = pd.read_parquet(run.dataset(DATASET).questions)
    assert all(
        len(a) == len(questions) and not any(r["error"] for r in a) for a in answers.values()
    )
    judgments = read_jsonl(run.dataset(DATASET).judgments)
    segments = pd.read_parquet(run.dataset(DATASET).memory / "segments.parquet")
    updates = read_jsonl(run.dataset(DATASET).memory / "updates.jsonl")
    assert stages["read"] == len(answers["memory_mem0_style"])
    assert stages["long_context"] == sum(len(answers[s]) for s in SYSTEMS[1:])
    assert stages["judge"] == len(judgments) == 3 * len(SYSTEMS) * judged_questions(questions)
    assert stages["extract"] == (segments["status"] == "ok").sum() == len(segments)
    assert stages["update"] == len(
        {(u["conversation_id"], u["segment_index"]) for u in updates if u["prompt_version"]}
    )
    embeds = [c for c in calls if c["stage"] == "embed"]
    assert len([c for c in embeds if c["question_id"]]) == len(questions)
    # re-asks happened and were recorded apart; every reply finally parsed
    reasks = [c for c in calls if c.get("reask")]
    assert reasks and all(c["prompt_version"].endswith("+json_reask@v1") for c in reasks)
    assert {j["label"] for j in judgments} <= {"CORRECT", "WRONG"}
    assert all(c["reasoning_tokens"] > 0 for c in calls if c["model"].startswith("gpt-5"))
    long_context = [c for c in calls if c["stage"] == "long_context"]
    assert any(c["cached_prompt_tokens"] > 0 for c in long_context)
    assert max(c["attempts"] for c in calls) == 2  # the 429 and the 500, retried once each


def judged_questions(questions: pd.DataFrame) -> int:
    return int((questions["category"] != "adversarial").sum())  # category 5 is left out


def test_analysis_labels_the_costs_measured(world):
    run = world.first.paths
    metrics = read_json(run.root / "metrics" / "05_analyse_costs.json")["metrics"]
    assert metrics["estimate"] is False
    assert metrics["ledger_records"] == len(read_calls(run.calls))
    assert metrics["spent_usd"] > 0
    for name in ("cost_summary", "cost_by_stage", "cost_lc_cached_share", "cost_token_ratios"):
        table = pd.read_csv(run.tables / f"{name}.csv")
        assert set(table["basis"]) == {MEASURED}, name
    # the measured cached share comes from the server's prompt cache (prefixes >= 1,024 tokens)
    share = pd.read_csv(run.tables / "cost_lc_cached_share.csv").set_index("system")
    assert 0.5 < share.loc["long_context_gpt-5-mini", "share_after_first"] < 1.0
    assert share.loc["long_context_gpt-5-mini", "assumed_share"] == 1.0
    # each system's workload holds every question, also those the disk cache served
    by_stage = pd.read_csv(run.tables / "cost_by_stage.csv")
    judge = by_stage.loc[by_stage["stage"] == "judge"].set_index("system")["records"]
    votes = Counter(j["system"] for j in read_jsonl(run.dataset(DATASET).judgments))
    reasks = Counter(
        c["system"] for c in read_calls(run.calls) if c["stage"] == "judge" and c.get("reask")
    )
    assert judge.to_dict() == {s: votes[s] + reasks[s] for s in SYSTEMS}
    summary = pd.read_csv(run.tables / "cost_summary.csv").set_index("component")
    questions = len(pd.read_parquet(run.dataset(DATASET).questions))
    assert (summary.filter(like="answer:", axis=0)["questions"] == questions).all()
    step03 = read_json(run.dataset(DATASET).metrics / "03_answer_long_context.json")["metrics"]
    assert step03["cache_measured"] is True


def test_the_report_says_what_this_api_run_did(world):
    run = world.first.paths
    text = run.report_md.read_text(encoding="utf-8")
    judge = next(line for line in text.splitlines() if line.startswith("Judge (the paper's"))
    assert judge.endswith(
        "): LoCoMo: gpt-5-mini-2025-08-07 at reasoning effort high, 3 votes, interactive."
    )
    assert "offline" not in judge
    assert "The paper calls this split" not in text  # a LoCoMo run: no PersonaMem note
    # the prefix-cache rule's prediction beside what the server reported as cached
    assert "The offline backend has no provider cache" not in text
    share = pd.read_csv(run.tables / "cost_lc_cached_share.csv").set_index("system")
    measured = 100 * share.loc["long_context_gpt-5-mini", "cached_share"]
    row = next(
        line
        for line in text.splitlines()
        if line.startswith("| LoCoMo | long context, gpt-5-mini | 31 |")
    )
    assert row.endswith(f"| {measured:.1f} |") and "provider's share of all input" in text


def test_manifest_records_snapshots_and_cache_hits(world):
    manifest = world.first_manifest
    assert manifest["models"] == {
        model: {"backend": "custom", "served": [served]}
        for model, served in (
            ("gpt-5-nano-2025-08-07", "gpt-5-nano-2025-08-07"),
            ("gpt-5-mini-2025-08-07", "gpt-5-mini-2025-08-07"),
            ("openai/gpt-oss-120b", "openai/gpt-oss-120b"),
            ("text-embedding-3-small", "text-embedding-3-small"),
        )
    }
    llm = manifest["llm"]
    assert llm[f"{DATASET}/01_extract_facts"]["cache_hits"] >= 1  # the example call, repeated
    assert (
        llm[f"{DATASET}/01_extract_facts"]["reasks"] + llm[f"{DATASET}/04_judge_answers"]["reasks"]
        > 0
    )
    assert llm[f"{DATASET}/03_answer_long_context"]["retries"] == 1
    for entry in llm.values():
        assert entry["backend"] == "custom" and entry["endpoints"]["custom"]["key_env"] == KEY_ENV


def test_the_key_is_in_no_file_and_no_output(world):
    # every run directory (ledger, manifest, executed notebooks, logs), both caches, the output
    everything = [p for p in world.cache.parent.rglob("*") if p.is_file()]
    assert any(p.name == "calls.sqlite" for p in everything)
    assert any(p.suffix == ".log" for p in everything)
    assert not [p for p in everything if KEY.encode() in _bytes(p)]


def _bytes(path):
    """A file's bytes; nothing for one another test's process removed while this one looked
    (a closing SQLite connection removes its WAL file)."""
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return b""


# ---------------------------------------------------------------------------------------------
# Resume, replay, budget
# ---------------------------------------------------------------------------------------------
def test_resume_sends_nothing_records_nothing_and_changes_nothing(world):
    assert world.resumed.requests == []
    assert _files(world.first.paths.root) == world.first_files
    manifest = read_json(world.first.paths.manifest)
    for step in STEPS_MODEL:
        name = next(p.stem for n, p in discover_notebooks().items() if n == step)
        summary = manifest["llm"][f"{DATASET}/{name}"]
        assert summary["api_calls"] == 0 and summary["recorded"] == 0, name


def test_replay_only_serves_everything_from_the_cache(world):
    assert world.replay.requests == []
    first = read_calls(world.first.paths.calls)
    replayed = read_calls(world.replay.paths.calls)
    assert len(replayed) == len(first) and all(c["cached"] for c in replayed)
    assert {record_call_key(c) for c in replayed} == {record_call_key(c) for c in first}
    priced = costs.price_calls(costs.load_ledger([world.replay.paths]))
    assert priced["spent_usd"].sum() == 0.0
    # ... and the workload is the first run's, at the same list price
    first_priced = costs.price_calls(costs.load_ledger([world.first.paths]))
    assert costs.workload(priced)["cost_usd"].sum() == pytest.approx(
        costs.workload(first_priced)["cost_usd"].sum()
    )
    for system in SYSTEMS:
        a = answers_by_question(world.first.paths, system)
        b = answers_by_question(world.replay.paths, system)
        assert a == b, system
    key = lambda j: (j["system"], j["question_id"], j["prompt_name"], j["vote"])  # noqa: E731
    votes = {key(j): j for j in read_jsonl(world.first.paths.dataset(DATASET).judgments)}
    again = {key(j): j for j in read_jsonl(world.replay.paths.dataset(DATASET).judgments)}
    assert again == votes


def answers_by_question(run: RunPaths, system: str) -> dict[str, dict]:
    """Answers by question, without what is measured locally (the HNSW search time)."""
    return {
        r["question_id"]: {k: v for k, v in r.items() if k != "search_latency_s"}
        for r in read_jsonl(run.dataset(DATASET).answers_file(system))
    }


def test_budget_stops_cleanly_keeping_what_was_done(world):
    run = world.budget
    assert run.returncode == 1
    assert "01_extract_facts.ipynb failed" in run.output and "BudgetExceeded" in run.output
    assert "stopped at its budget" in run.output and "-p max_cost_usd=<dollars>" in run.output
    assert "-p backend=custom" in run.output  # the printed resume command keeps the backend
    calls = read_calls(run.paths.calls)
    # a call still waiting for its turn when the budget stopped the stage was never sent, so
    # it is no record (it is asked again on resume); every record was paid, none was stored
    # before this run
    assert not [c for c in calls if c["error"]]
    paid = calls
    assert paid and not [c for c in calls if c["cached"]]
    priced = costs.price_calls(costs.load_ledger([run.paths]))
    assert 0 < priced["spent_usd"].sum() <= BUDGET_USD
    answered = [r for r in run.requests if r.status == 200]
    assert len(answered) == len(paid)  # every answered request is recorded ...
    with sqlite3.connect(store_path(run.paths.root)) as conn:  # ... with its answer
        stored = {
            k for (k,) in conn.execute("SELECT request_hash FROM calls WHERE answer IS NOT NULL")
        }
    assert stored == {c["request_hash"] for c in paid}
    assert f"max_cost_usd = ${BUDGET_USD:.4f}" in run.output
    manifest = read_json(run.paths.manifest)
    assert manifest["notebooks"][f"{DATASET}/01_extract_facts"]["status"] == "failed"
    assert manifest["notebooks"][f"{DATASET}/01_extract_facts"]["ename"] == "BudgetExceeded"
    assert run_status(manifest, run.paths.root) == "stopped at its budget"
    assert f"{DATASET}/02_answer_from_memory" not in manifest["notebooks"]
