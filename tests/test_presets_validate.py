"""Every shipped preset passes the checks a run makes before it creates anything."""

from __future__ import annotations

import pytest

from memcost.run import discover_notebooks, load_preset
from memcost.run.presets import PresetError, preset_files, validate_run

PRESETS = sorted(preset_files())  # papermill_params/'s and the plugins'


def test_the_presets_are_the_documented_ones():
    assert {"smoke", "paper_locomo", "current_locomo", "serving_smoke"} <= set(PRESETS)


@pytest.mark.parametrize("name", PRESETS)
def test_a_shipped_preset_validates_without_creating_its_run(name, tmp_path, monkeypatch):
    """A preset's models are priced (by the table, the preset's or the notebook's own
    ``price_overrides``) and its parameters are valid, so ``make reproduce PRESET=<name>`` gets
    past validation (serving_smoke once failed here: notebook 06 prices its models itself).
    A library's own environment counts as set up (without it: test_serving_notebook.py)."""
    from memcost_systems.libraries import LibrarySystem

    monkeypatch.setattr(LibrarySystem, "check_available", classmethod(lambda cls: None))
    run_dir = tmp_path / "run"
    validate_run(load_preset(name), discover_notebooks(), run_dir)
    assert not run_dir.exists()


def test_a_preset_includes_another_and_changes_only_what_it_names(tmp_path):
    base = load_preset("paper_locomo")
    derived = load_preset("paper_longmemeval")
    assert derived.datasets == ["longmemeval"]
    assert derived.parameters == {**base.parameters, "longmemeval_file": "s", "max_cost_usd": 80.0}
    (tmp_path / "mine.yaml").write_text(
        "include: paper_locomo\nparameters:\n  client: {max_concurrency: 4}\n  top_k: 10\n",
        encoding="utf-8",
    )
    mine = load_preset(tmp_path / "mine.yaml")
    assert mine.description == base.description and mine.datasets == ["locomo"]
    assert mine.parameters["top_k"] == 10
    # a mapping given in part keeps the included preset's other settings
    assert mine.parameters["client"] == {**base.parameters["client"], "max_concurrency": 4}


def test_presets_that_include_each_other_are_refused_in_one_line(tmp_path):
    from memcost.run.presets import PresetError

    (tmp_path / "a.yaml").write_text("include: b\n", encoding="utf-8")
    (tmp_path / "b.yaml").write_text("include: a\ndatasets: [locomo]\n", encoding="utf-8")
    with pytest.raises(PresetError, match=r"a.yaml: presets include each other in a circle"):
        load_preset(tmp_path / "a.yaml")
    (tmp_path / "c.yaml").write_text("include: nowhere\n", encoding="utf-8")
    with pytest.raises(PresetError, match=r"^preset not found: nowhere \(the presets: current_lo"):
        load_preset(tmp_path / "c.yaml")


@pytest.mark.parametrize("name", PRESETS)
def test_every_model_a_shipped_preset_pays_for_is_in_the_catalog(name):
    """The check a run makes before any call: serving_paper once named a backbone the catalog
    did not know (google/gemma-4-26b-a4b, not OpenRouter's name for it), so it could not start."""
    from memcost.run.checks import check_lifecycle

    check_lifecycle(load_preset(name), discover_notebooks(), on="2026-12-01")


def test_notebook_04s_systems_are_not_taken_for_the_serving_studys(tmp_path):
    """Both notebooks 04 and 06 declare ``systems``: only a preset that runs 06 has its list
    checked as served systems (04's are answer systems, e.g. ``memory``)."""
    (tmp_path / "judge.yaml").write_text(
        "include: smoke\nparameters:\n  systems: [memory]\n", encoding="utf-8"
    )
    validate_run(load_preset(tmp_path / "judge.yaml"), discover_notebooks(), tmp_path / "run")
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("where", ["parameters", "per_dataset"])
def test_an_even_number_of_judge_votes_is_refused_before_the_run(tmp_path, where):
    """Two votes can tie, and a tie is not a majority: the answer would count as wrong."""
    from memcost.run import PresetError

    block = "parameters:\n  n_votes: 2\n"
    if where == "per_dataset":
        block = "per_dataset:\n  locomo:\n    n_votes: 4\n"
    (tmp_path / "votes.yaml").write_text(f"include: smoke\n{block}", encoding="utf-8")
    with pytest.raises(PresetError, match=r"^parameter n_votes=[24]: the judge's votes need a "):
        validate_run(load_preset(tmp_path / "votes.yaml"), discover_notebooks(), tmp_path / "run")
    assert not (tmp_path / "run").exists()
    (tmp_path / "votes.yaml").write_text("include: smoke\nparameters:\n  n_votes: 5\n")
    validate_run(load_preset(tmp_path / "votes.yaml"), discover_notebooks(), tmp_path / "run")


def test_batch_is_refused_for_a_stage_whose_calls_come_one_after_another(
    tmp_path, capsys, monkeypatch
):
    """Hierarchical memory rewrites its summary every 10 messages, each call after the last: with
    the current presets' {extract: batch} each of some 60 waves on LoCoMo would have been a
    batch of its own, each up to 24 hours, where the estimate said "within 24 h". The paper's
    update phase ({update: batch}) likewise, a batch a segment. Refused in one line before the
    run; extraction of the paper's memory (one wave) and the offline backend are not."""
    from memcost.cli import main
    from memcost.run.presets import resolve_preset

    for key in ("OPENAI_API_KEY", "OPENROUTER_API_KEY"):
        monkeypatch.setenv(key, "sk-test")  # the keys are checked first
    notebooks = discover_notebooks()
    run_dir = tmp_path / "run"
    args = ["run", "--params", "current_locomo", "--run-name", str(run_dir), "-p"]
    assert main([*args, "memory_systems=[mem0_style, hierarchical]"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(
        "error: execution: {extract: batch} with memory system hierarchical: its extract calls "
        "come one after another (each waits for the one before), so each would be a batch of "
        "its own, up to 24 hours apiece; send extract interactive or flex "
    )
    assert "\n" not in err and not run_dir.exists()
    update = {"client": {"execution": {"update": "batch"}}}
    with pytest.raises(PresetError, match=r"\{update: batch\} with memory system mem0_style"):
        validate_run(
            resolve_preset("paper_locomo", notebooks, overrides=update), notebooks, run_dir
        )
    no_update = {**update, "update_phase": False}  # one extraction pass: nothing in turn
    validate_run(resolve_preset("paper_locomo", notebooks, overrides=no_update), notebooks, run_dir)
    validate_run(load_preset("current_locomo"), notebooks, run_dir)  # mem0_style: one wave
    for name in ("graph", "observational", "mem0"):
        systems = {"memory_systems": ["mem0_style", name]}
        with pytest.raises(PresetError, match=f"memory system {name}: its extract calls"):
            validate_run(
                resolve_preset("current_locomo", notebooks, overrides=systems), notebooks, run_dir
            )
    rag = {"memory_systems": ["mem0_style", "rag"]}  # embeddings only
    validate_run(resolve_preset("current_locomo", notebooks, overrides=rag), notebooks, run_dir)
    offline = {"backend": "offline", "memory_systems": ["mem0_style", "hierarchical"]}
    validate_run(resolve_preset("current_locomo", notebooks, overrides=offline), notebooks, run_dir)


def test_a_run_written_before_the_rename_of_the_papers_memory_is_refused_in_one_line(tmp_path):
    """Resuming it would judge ``answers_memory.jsonl`` beside ``answers_memory_mem0_style.jsonl``
    and the report would stop at a name it does not know."""
    answers = tmp_path / "run" / "locomo" / "answers"
    answers.mkdir(parents=True)
    (answers / "answers_memory.jsonl").write_text("{}\n", encoding="utf-8")
    with pytest.raises(PresetError) as refused:
        validate_run(load_preset("smoke"), discover_notebooks(), tmp_path / "run")
    assert str(refused.value) == (
        f"{answers / 'answers_memory.jsonl'}: 'memory' is not a system name of this version (the "
        "paper's memory is now 'memory_mem0_style'); this run was written by an earlier version: "
        "start a new run (--run-name)"
    )
    (answers / "answers_memory.jsonl").rename(answers / "answers_memory_mem0_style.jsonl")
    validate_run(load_preset("smoke"), discover_notebooks(), tmp_path / "run")
