"""All five memory systems over the API path: notebooks 00-04 on LoCoMo against the local
OpenAI-compatible server, which answers each system's prompts in their formats (some JSON
replies malformed, so the re-asks run), through the CLI as a user with a key runs it."""

from __future__ import annotations

import os
import subprocess
import sys

import pandas as pd
import pytest
import yaml
from fake_api.stages import ENTITIES, RELATIONS, SUMMARY, stage_of, stage_server

from memcost.calls import read_calls
from memcost.paths import REPO_ROOT, RunPaths

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]
KEY_ENV = "MEMCOST_SYSTEMS_TEST_KEY"
KEY = "sk-memcost-fake-" + "systems-0123456789"
SYSTEMS = [
    "mem0_style",
    "rag",
    "graph",
    "hierarchical",
    {"observational": {"observer_tokens": 600, "reflector_tokens": 400}},
]


def test_notebooks_00_to_04_build_answer_and_judge_five_systems_over_the_api(tmp_path):
    preset = tmp_path / "systems.yaml"
    preset.write_text(
        yaml.safe_dump(
            {
                "datasets": ["locomo"],
                "steps": ["00", "01", "02", "03", "04"],
                "parameters": {
                    "memory_systems": SYSTEMS,
                    "include_no_context": False,
                    "include_oracle": False,
                    "judge_prompts": ["judge"],
                    "models": ["gpt-5-mini-2025-08-07"],
                },
            }
        ),
        encoding="utf-8",
    )
    run = RunPaths(tmp_path / "run")
    env = {**os.environ, KEY_ENV: KEY, "MEMCOST_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("OPENAI_API_KEY", None)
    with stage_server(api_key=KEY) as server:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "memcost",
                "run",
                "--params",
                str(preset),
                "--run-name",
                str(run.root),
                "--quiet",
                "-p",
                "backend=custom",
                "-p",
                f"base_url={server.url}",
                "-p",
                f"client={{api_key_env: {KEY_ENV}}}",
            ],
            cwd=REPO_ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=540,
        )
        stages = [stage_of(r.body) for r in server.requests if isinstance(r.body, dict)]
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    # the server saw each system's own prompts
    assert {ENTITIES, RELATIONS, SUMMARY} <= set(stages)
    table3 = pd.read_csv(run.dataset("locomo").table.table3).set_index("system")
    assert {
        "memory_mem0_style",
        "memory_rag",
        "memory_graph",
        "memory_hierarchical",
        "memory_observational",
    } <= set(table3.index)
    assert (table3.loc["memory_graph", "n"] == table3.loc["memory_mem0_style", "n"]) and (
        table3["backend"] == "custom"
    ).all()
    calls = pd.DataFrame(read_calls(run.calls))
    graph = calls.loc[(calls["system"] == "memory_graph") & (calls["stage"] == "extract")]
    assert set(graph["memory_step"]) == {"entities", "relations"}
    assert set(graph["backend"]) == {"custom"}
    rag = calls.loc[calls["system"] == "memory_rag"]
    assert set(rag["stage"]) == {"embed", "read", "judge"}  # no extraction, ever
    observational = calls.loc[calls["system"] == "memory_observational", "memory_step"]
    assert {"observer", "reflector"} <= set(observational.dropna())
