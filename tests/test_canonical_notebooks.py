"""The runner executes the canonical notebooks only, warns about copies, records their hashes."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess

import nbformat
import pytest

from memcost.paths import NOTEBOOKS_DIR, REPO_ROOT
from memcost.run import run_preset
from memcost.run.runner import (
    CORE_NOTEBOOKS,
    discover_notebooks,
    stray_notebooks,
    stray_warnings,
)

STRAYS = ("00_prepare_data.nbconvert.ipynb", "00_x_v2.ipynb")
COPY = "00_prepare_data-Copy1.ipynb"  # what Jupyter names a duplicated notebook


def _stray(path, marker):
    """A notebook that, if it ran, would write ``marker`` and fail the run."""
    nb = nbformat.read(NOTEBOOKS_DIR / "00_prepare_data.ipynb", as_version=4)
    nb.cells.insert(
        0,
        nbformat.v4.new_code_cell(
            f"open({str(marker)!r}, 'w').write('ran')\nraise SystemExit('a stray copy ran')"
        ),
    )
    nbformat.write(nb, path)


def test_the_repository_folder_holds_exactly_the_listed_notebooks():
    found = discover_notebooks()
    assert [p.name for p in found.values() if p.parent == NOTEBOOKS_DIR] == list(CORE_NOTEBOOKS)
    assert list(found)[:6] == ["00", "01", "02", "03", "04", "05"]
    assert stray_notebooks() == []


def test_gitignore_covers_the_copies():
    for name in STRAYS[:1] + (COPY, "05_analyse_costs-Copy1.ipynb"):
        probe = subprocess.run(["git", "check-ignore", "-q", f"notebooks/{name}"], cwd=REPO_ROOT)
        assert probe.returncode == 0, f"{name} is not ignored"


def test_strays_are_warned_about_and_the_canonical_notebook_runs(tmp_path, capsys):
    folder = tmp_path / "notebooks"
    shutil.copytree(NOTEBOOKS_DIR, folder)
    marker = tmp_path / "stray_ran"
    for name in STRAYS + (COPY,):
        _stray(folder / name, marker)
    assert discover_notebooks(folder)["00"].name == "00_prepare_data.ipynb"
    assert sorted(p.name for p in stray_notebooks(folder)) == sorted(STRAYS + (COPY,))
    assert all("00_prepare_data.ipynb runs instead" in w for w in stray_warnings(folder))

    # notebook 00 on one bundled sample: the quickest notebook the strays copy
    run = run_preset(
        "smoke",
        run_name=str(tmp_path / "run"),
        notebooks_dir=folder,
        steps=["00"],
        datasets=["locomo"],
    )
    out = capsys.readouterr().out
    for name in STRAYS:
        assert f"warning: {name} in notebooks/ is not a canonical notebook" in out
    assert not marker.exists()
    assert run.dataset("locomo").questions.is_file()  # what the canonical notebook writes
    manifest = json.loads(run.manifest.read_text())
    entry = manifest["notebooks"]["locomo/00_prepare_data"]
    assert entry["status"] == "ok"
    canonical = folder / "00_prepare_data.ipynb"
    assert entry["sha256"] == hashlib.sha256(canonical.read_bytes()).hexdigest()
    # the log holds the warnings and the line per notebook
    log = next(run.logs.glob("run-*.log")).read_text()
    assert "warning: 00_x_v2.ipynb" in log and "notebook 1 of 1: 00_prepare_data" in log


def test_a_foreign_folder_with_two_notebooks_for_one_number_is_an_error(tmp_path):
    for name in ("00_a.ipynb", "00_b.ipynb"):
        nbformat.write(nbformat.v4.new_notebook(), tmp_path / name)
    nbformat.write(nbformat.v4.new_notebook(), tmp_path / "01_c.nbconvert.ipynb")
    with pytest.raises(ValueError, match="two notebooks numbered 00"):
        discover_notebooks(tmp_path)
    (tmp_path / "00_b.ipynb").unlink()
    assert list(discover_notebooks(tmp_path)) == ["00"]
    assert [p.name for p in stray_notebooks(tmp_path)] == ["01_c.nbconvert.ipynb"]
