"""A class works in copies: opening, running and saving notebooks never dirties the clone."""

from __future__ import annotations

import json
import subprocess

from memcost.cli import main
from memcost.paths import REPO_ROOT
from memcost.run.runner import CORE_NOTEBOOKS, execute_notebook, study_notebooks


def test_a_saved_workshop_notebook_leaves_git_status_and_the_checks_clean(tmp_path, capsys):
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(REPO_ROOT), str(clone)], check=True)
    target = clone / "runs" / "workshop"
    assert main(["workshop", "--dir", str(target)]) == 0
    study = sorted(p.name for p in study_notebooks().values())
    assert sorted(p.name for p in target.glob("*.ipynb")) == study  # the plugins' too
    # what JupyterLab's autosave writes after Run All: outputs and volatile metadata
    saved = target / "05_analyse_costs.ipynb"
    nb = json.loads(saved.read_text(encoding="utf-8"))
    for i, cell in enumerate(c for c in nb["cells"] if c["cell_type"] == "code"):
        cell["outputs"] = [{"output_type": "stream", "name": "stdout", "text": ["x" * 500]}]
        cell["execution_count"] = i + 1
    nb["metadata"]["widgets"] = {"state": {}}
    saved.write_text(json.dumps(nb), encoding="utf-8")
    status = subprocess.run(
        ["git", "status", "--porcelain"], cwd=clone, capture_output=True, text=True, check=True
    ).stdout
    assert status == ""  # runs/ is ignored: nothing a class does there shows
    for name in CORE_NOTEBOOKS:  # the committed notebooks, as the repository check reads
        committed = json.loads((clone / "notebooks" / name).read_text(encoding="utf-8"))
        assert not any(c.get("outputs") for c in committed["cells"] if c["cell_type"] == "code")
    # a second `make lab` keeps the class's copy; --fresh starts over and keeps the old aside
    assert main(["workshop", "--dir", str(target)]) == 0
    assert "x" * 500 in saved.read_text(encoding="utf-8")
    assert main(["workshop", "--dir", str(target), "--fresh"]) == 0
    assert "x" * 500 not in saved.read_text(encoding="utf-8")
    assert len(list(target.glob("previous-*/05_analyse_costs.ipynb"))) == 1
    capsys.readouterr()


def test_a_workshop_copy_runs_where_it_was_copied(tmp_path):
    from memcost.cli import copy_notebooks

    copy_notebooks(tmp_path / "workshop")
    out = tmp_path / "executed.ipynb"
    execute_notebook(
        tmp_path / "workshop" / "07_costs_today.ipynb",
        out,
        {"run_dir": str(tmp_path / "run"), "interactive_explorer": False},
    )
    assert (tmp_path / "run" / "tables" / "table5_today.csv").is_file()


def test_the_workshop_copy_of_notebook_07_has_the_sliders_on_and_the_batch_default_off(tmp_path):
    """A class in JupyterLab gets the explorer's sliders; a headless run (the runner, papermill)
    does not display widgets, on which nbclient can hang (jupyter/nbclient#312)."""
    from memcost.cli import copy_notebooks
    from memcost.params import notebook_defaults
    from memcost.paths import NOTEBOOKS_DIR

    assert (
        notebook_defaults(NOTEBOOKS_DIR / "07_costs_today.ipynb")["interactive_explorer"] is False
    )
    copy_notebooks(tmp_path / "workshop")
    copy = json.loads((tmp_path / "workshop" / "07_costs_today.ipynb").read_text(encoding="utf-8"))
    injected = [c for c in copy["cells"] if "injected-parameters" in c["metadata"].get("tags", [])]
    assert len(injected) == 1 and "interactive_explorer = True" in "".join(injected[0]["source"])
