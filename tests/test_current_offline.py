"""The ``current_*`` presets try offline with ``-p backend=offline`` alone: every model runs
offline (the preset's OpenRouter route for gpt-oss is dropped, with one line saying so), no key
is asked for, the estimate prints the successor models' prices, and a download that fails for
want of network says in one line how to use the bundled samples."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from memcost.calls import read_calls
from memcost.catalog import price_for
from memcost.cli import main, print_resume_hint
from memcost.paths import RunPaths
from memcost.run import discover_notebooks
from memcost.run.checks import preflight_credentials
from memcost.run.presets import PresetError, resolve_preset
from memcost.run.runner import NotebookFailed

OFFLINE = {"backend": "offline", "download": False}
DROPPED = (
    "backend=offline: every model runs offline; model_backends "
    "(openai/gpt-oss-120b -> openrouter) is ignored"
)


def price_line(model: str) -> str:
    p = price_for(model)
    return f"  {model}: {p.input:g} / {p.cached_input:g} / {p.output:g} (dated {p.date})"


@pytest.fixture
def no_keys(monkeypatch):
    for name in ("OPENAI_API_KEY", "OPENROUTER_API_KEY"):
        monkeypatch.delenv(name, raising=False)


@pytest.mark.parametrize("name", ["current_locomo", "current_longmemeval", "current_personamem"])
def test_backend_offline_runs_every_model_offline_without_a_key(name, no_keys, capsys):
    notebooks = discover_notebooks()
    preset = resolve_preset(name, notebooks, overrides=OFFLINE)
    assert preset.parameters["client"]["model_backends"] == {}
    assert preset.parameters["client"]["max_concurrency"] == 32  # the other settings kept
    assert preset.notes == [DROPPED]
    preflight_credentials(preset, notebooks)  # no key asked for, no model refused
    out = capsys.readouterr().out
    assert price_line("gpt-6.1-terra") in out and price_line("gpt-6-luna") in out
    assert "gpt-5" not in out  # the successors only
    paid = resolve_preset(name, notebooks)  # an API run keeps the preset's routing
    assert paid.parameters["client"]["model_backends"] == {"openai/gpt-oss-120b": "openrouter"}
    assert paid.notes == []


def test_a_model_left_out_needs_no_key_for_its_provider(monkeypatch, no_keys):
    """The paper's presets route gpt-oss-120b to OpenRouter. A user with an OpenAI key alone
    who leaves it out (``-p models=[gpt-5-mini-2025-08-07]``) was refused for want of
    OPENROUTER_API_KEY, by the runner and again by every notebook's client; the route is now
    dropped, with one line saying so. A model the run still calls keeps its route and its key,
    a memory system's own model included."""
    from memcost.run.checks import paid_models

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    notebooks = discover_notebooks()
    mini = {"models": ["gpt-5-mini-2025-08-07"]}
    preset = resolve_preset("paper_locomo", notebooks, overrides=mini)
    assert preset.parameters["client"]["model_backends"] == {}
    assert preset.notes == [
        "model_backends (openai/gpt-oss-120b -> openrouter) is ignored: no notebook of this "
        "run calls that model"
    ]
    preflight_credentials(preset, notebooks)  # no OpenRouter key asked for
    assert "openai/gpt-oss-120b" not in paid_models(preset, notebooks)
    # a run of notebook 00 alone calls no model at all
    assert resolve_preset("paper_locomo", notebooks, steps=["00"]).notes == preset.notes
    # kept where the run calls it: in models, or as a memory system's own model
    kept = resolve_preset("paper_locomo", notebooks)
    assert kept.parameters["client"]["model_backends"] == {"openai/gpt-oss-120b": "openrouter"}
    graph = {"graph": {"extraction_model": "openai/gpt-oss-120b"}}
    own = resolve_preset(
        "paper_locomo", notebooks, overrides={**mini, "memory_systems": ["mem0_style", graph]}
    )
    assert own.notes == [] and "openai/gpt-oss-120b" in paid_models(own, notebooks)
    with pytest.raises(PresetError, match="OPENROUTER_API_KEY"):
        preflight_credentials(own, notebooks)


def test_a_failed_download_says_in_one_line_how_to_use_the_bundled_samples(capsys):
    args = argparse.Namespace(
        params="current_locomo",
        steps=None,
        datasets=None,
        allow_failures=None,
        overrides=[("backend", "offline"), ("download", True)],
    )
    exc = NotebookFailed(
        Path("00_prepare_data.ipynb"),
        Path("out.ipynb"),
        6,
        "DataError: could not download LoCoMo from https://x/locomo10.json: "
        "<urlopen error [Errno -2] Name or service not known>. With no network, "
        "...",
        ename="DataError",
    )
    exc.run_dir = "r"
    print_resume_hint(args, exc)
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines == [
        "No network? Use the bundled samples instead: python -m memcost run "
        "--params current_locomo --run-name r -p backend=offline -p download=false"
    ]


def test_a_failed_download_before_notebook_08_does_not_offer_the_bundled_samples(tmp_path, capsys):
    # The published runs' files have no bundled stand-in: download=false would only move the
    # failure on to notebook 08, so the hint names what notebook 08 reads instead.
    run_dir = tmp_path / "published-run"
    run_dir.mkdir()
    (run_dir / "manifest.json").write_text(json.dumps({"runs": [{"steps": ["00", "08"]}]}))
    args = argparse.Namespace(
        params="published", steps=None, datasets=None, allow_failures=None, overrides=[]
    )
    exc = NotebookFailed(
        Path("00_prepare_data.ipynb"),
        Path("out.ipynb"),
        6,
        "DataError: could not download LoCoMo from https://x/locomo10.json: no network",
        ename="DataError",
    )
    exc.run_dir = str(run_dir)
    print_resume_hint(args, exc)
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "download=false" not in lines[0]
    assert lines[0].startswith("No network? Notebook 08 reads the published runs' own files")
    assert "published_dir" in lines[0] and "data_path" in lines[0]


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_current_locomo_runs_offline_end_to_end(tmp_path, no_keys, capsys):
    run = RunPaths(tmp_path / "run")
    code = main(
        [
            "run",
            "--params",
            "current_locomo",
            "--run-name",
            str(run.root),
            "-p",
            "backend=offline",
            "-p",
            "download=false",
            "-p",
            "interactive_explorer=false",
        ]
    )  # no widgets: nothing here looks at them
    out = capsys.readouterr()
    assert code == 0, out.err[-3000:]
    assert DROPPED in out.out
    assert price_line("gpt-6.1-terra") in out.out and price_line("gpt-6-luna") in out.out
    assert "estimated bill of this run" in out.out
    calls = read_calls(run.calls)
    assert calls and {c["backend"] for c in calls} == {"offline"}
    assert {"gpt-6.1-terra", "gpt-6-luna", "openai/gpt-oss-120b"} <= {c["model"] for c in calls}
    assert run.report_md.is_file()
