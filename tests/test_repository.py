"""Repository-wide checks: committed notebooks and presets are runnable as shipped."""

from __future__ import annotations

import json
import re

import papermill
import pytest

from memcost.params import notebook_parameters
from memcost.paths import NOTEBOOKS_DIR
from memcost.run import discover_notebooks, load_preset
from memcost.run.presets import preset_files, validate_preset
from memcost.run.runner import study_notebooks

NOTEBOOKS = sorted(study_notebooks().values())  # the plugins' too
PRESETS = sorted(preset_files().values())


def test_there_is_something_to_check():
    assert NOTEBOOKS and PRESETS


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_committed_without_outputs(notebook):
    nb = json.loads(notebook.read_text())
    dirty = [
        i
        for i, c in enumerate(nb["cells"])
        if c["cell_type"] == "code" and (c.get("outputs") or c.get("execution_count"))
    ]
    assert not dirty, f"{notebook.name}: cells {dirty} carry outputs; clear them before committing"
    assert nb["metadata"]["kernelspec"]["name"] == "python3"


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.name)
def test_one_parameters_cell_with_typed_commented_literals(notebook):
    nb = json.loads(notebook.read_text())
    tagged = [c for c in nb["cells"] if "parameters" in c["metadata"].get("tags", [])]
    assert len(tagged) == 1, f"{notebook.name}: expected one cell tagged 'parameters'"
    declared = notebook_parameters(notebook)
    assert "run_dir" in declared
    for name, info in declared.items():
        assert info["inferred_type_name"] != "None", (
            f"{notebook.name}: {name} has no type annotation"
        )
        assert info["help"], f"{notebook.name}: {name} has no trailing comment"


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.name)
def test_papermill_sees_the_same_parameters(notebook):
    """`papermill --help-notebook` must show what the runner validates against (papermill's own
    parser drops a parameter whose trailing comment contains '=')."""
    ours = notebook_parameters(notebook)
    theirs = papermill.inspect_notebook(str(notebook))
    assert set(ours) == set(theirs)
    for name in ours:
        assert ours[name]["inferred_type_name"] == theirs[name]["inferred_type_name"], name
        assert ours[name]["help"] == theirs[name]["help"], name
        assert ours[name]["default"] == theirs[name]["default"], name


@pytest.mark.parametrize("preset", PRESETS, ids=lambda p: p.name)
def test_every_preset_key_is_a_parameter_of_its_notebooks(preset):
    validate_preset(load_preset(preset), discover_notebooks())


@pytest.mark.parametrize("name", ["paper_locomo", "paper_longmemeval", "paper_personamem"])
def test_real_preset_without_keys_stops_before_anything_runs(name, tmp_path, monkeypatch):
    from memcost.llm import providers
    from memcost.run import PresetError, run_preset

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENROUTER_API_KEY", raising=False)
    monkeypatch.setattr(providers, "DEFAULT_ENV_FILE", tmp_path / "no.env")  # ignore a local .env
    with pytest.raises(PresetError) as info:
        run_preset(name, run_name=str(tmp_path / "run"), stream=False)
    message = str(info.value)
    assert "OPENAI_API_KEY" in message and "OPENROUTER_API_KEY" in message
    assert "offline" in message
    assert not (tmp_path / "run").exists()


def test_paper_presets_use_the_papers_settings():
    for name in ("paper_locomo", "paper_longmemeval", "paper_personamem"):
        params = load_preset(name).parameters
        assert params["extraction_model"] == "gpt-5-nano-2025-08-07"
        assert params["extraction_reasoning_effort"] == "low"
        assert params["reader_model"] == params["judge_model"] == "gpt-5-mini-2025-08-07"
        assert params["top_k"] == 20 and params["n_votes"] == 3
        assert params["reasoning_effort"] == "high"
        assert params["models"] == ["gpt-5-mini-2025-08-07", "openai/gpt-oss-120b"]
        assert params["backend"] == "openai" and params["download"] is True
    persona = load_preset("paper_personamem")  # the 32k split whole: its 222 and 589 are the
    assert persona.datasets == ["personamem"]  # paper's, so nothing is sampled
    assert not {"sample_conversations", "sample_questions"} & set(persona.parameters)


# What ``make lint`` checks. Not the notebooks: their parameters cells keep one parameter per
# line with its help as a trailing comment, which is what papermill --help-notebook reads.
LINTED = ("src", "tests", "benchmarks")


def test_the_code_passes_the_linter_line_length_included():
    """``make lint`` in the suite, so that CI holds the 100-character lines and the import order
    (pyproject.toml, [tool.ruff])."""
    import subprocess
    import sys

    from memcost.paths import REPO_ROOT

    done = subprocess.run(
        [sys.executable, "-m", "ruff", "check", *LINTED],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout[-3000:]


def test_the_code_and_notebooks_are_formatted_as_ruff_formats_them():
    """``ruff format --check`` (part of ``make lint``) in the suite: one layout everywhere, so
    that a diff shows what changed and not how someone's editor wraps lines."""
    import subprocess
    import sys

    from memcost.paths import REPO_ROOT

    done = subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--check", *LINTED],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout[-3000:]


def test_the_pgvector_store_defaults_to_the_layout_that_returns_top_k_at_any_scale():
    """A shared table filtered after its HNSW scan returns about 0.09 of 20 facts at the
    paper's scale (benchmarks/bench_vectorstore.py); a table per user returns 20. The default
    is the latter in every place a run opens the store; the trap stays one parameter away."""
    from memcost.memory.mem0_style import Mem0Style
    from memcost.params import notebook_defaults
    from memcost_pgvector.store import DEFAULT_LAYOUT

    for stem in ("01_extract_facts", "02_answer_from_memory"):
        assert notebook_defaults(NOTEBOOKS_DIR / f"{stem}.ipynb")["pgvector_layout"] == "per_user"
    assert Mem0Style.defaults["pgvector_layout"] == DEFAULT_LAYOUT == "per_user"


def test_what_a_user_reads_cites_the_papers_sections_not_a_private_note():
    """Citations name the paper's sections and tables ("paper §3.5", "Table 4") or the serving
    study's ("Total Recall §3"): a "study §8" points into a note the user does not have."""
    from memcost.paths import REPO_ROOT

    readable = [REPO_ROOT / "README.md", *(REPO_ROOT / "docs").glob("*.md")]
    readable += [*(REPO_ROOT / "src").rglob("*.py"), *(REPO_ROOT / "src").rglob("*.j2")]
    readable += [*NOTEBOOKS, *PRESETS]
    found = [
        f"{path.relative_to(REPO_ROOT)}:{number}"
        for path in readable
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if "study §" in line or NOTE_SECTION.search(line)
    ]
    assert len(readable) > 100 and not found, found


# A bare "§8", "§9", "§10", "§6.1": sections of the note, not of the paper (whose sections cited
# here are §3.1-§4.2) unless they are the serving study's ("Total Recall §8").
NOTE_SECTION = re.compile(r"(?<!Total Recall )§(?:[6-9]|1[0-9])\b")


def test_make_lab_starts_as_root_and_passes_more_options():
    """JupyterLab refuses root without --allow-root (containers, classroom VMs run as root)."""
    import os
    import subprocess

    from memcost.paths import REPO_ROOT

    shown = subprocess.run(
        ["make", "-n", "lab", "LAB_ARGS=--no-browser --port 8890"],
        cwd=REPO_ROOT, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    command = next(line for line in shown.splitlines() if "jupyter lab" in line)
    assert "--no-browser --port 8890" in command
    assert ("--allow-root" in command) == (os.geteuid() == 0)
